"""Identities: a ServiceAccount and exactly the rights its component needs, where it needs
them. Namespaced rights go in Roles of the namespaces concerned; a ClusterRole carries only
what is cluster-wide by nature (nodes, CRDs, reading every pod of a node)."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

RBAC_API = "rbac.authorization.k8s.io/v1"
RBAC_GROUP = "rbac.authorization.k8s.io"

Rules = list[dict[str, Any]]


def service_account(
    name: str, namespace: str, labels: dict[str, str], *, automount: bool = True
) -> dict[str, Any]:
    """automount=False for pods that never call the API: no token is mounted at all."""
    sa: dict[str, Any] = {
        "apiVersion": "v1",
        "kind": "ServiceAccount",
        "metadata": {"name": name, "namespace": namespace, "labels": labels},
    }
    if not automount:
        sa["automountServiceAccountToken"] = False
    return sa


def _subject(name: str, namespace: str) -> dict[str, str]:
    return {"kind": "ServiceAccount", "name": name, "namespace": namespace}


def role(name: str, namespace: str, labels: dict[str, str], rules: Rules) -> dict[str, Any]:
    return {
        "apiVersion": RBAC_API,
        "kind": "Role",
        "metadata": {"name": name, "namespace": namespace, "labels": labels},
        "rules": rules,
    }


def role_binding(
    name: str, namespace: str, labels: dict[str, str], sa_name: str, sa_namespace: str
) -> dict[str, Any]:
    """Binds the Role of the same name in `namespace` to one ServiceAccount."""
    return {
        "apiVersion": RBAC_API,
        "kind": "RoleBinding",
        "metadata": {"name": name, "namespace": namespace, "labels": labels},
        "roleRef": {"apiGroup": RBAC_GROUP, "kind": "Role", "name": name},
        "subjects": [_subject(sa_name, sa_namespace)],
    }


def cluster_role_and_binding(
    name: str, labels: dict[str, str], rules: Rules, sa_name: str, sa_namespace: str
) -> list[dict[str, Any]]:
    return [
        {
            "apiVersion": RBAC_API,
            "kind": "ClusterRole",
            "metadata": {"name": name, "labels": labels},
            "rules": rules,
        },
        {
            "apiVersion": RBAC_API,
            "kind": "ClusterRoleBinding",
            "metadata": {"name": name, "labels": labels},
            "roleRef": {"apiGroup": RBAC_GROUP, "kind": "ClusterRole", "name": name},
            "subjects": [_subject(sa_name, sa_namespace)],
        },
    ]


def identity(
    name: str,
    namespace: str,
    labels: dict[str, str],
    *,
    cluster_rules: Rules | None = None,
    namespaced_rules: Mapping[str, Rules] | None = None,
    role_name: str | None = None,
) -> list[dict[str, Any]]:
    """A component's ServiceAccount `namespace/name`, a ClusterRole (+ binding) named
    `role_name` for its cluster-wide rules, and a Role (+ binding) of that name in each
    namespace of `namespaced_rules`. ClusterRole names are cluster-wide, so callers prefix
    them with the cluster's name."""
    role_name = role_name or name
    objs = [service_account(name, namespace, labels)]
    if cluster_rules:
        objs += cluster_role_and_binding(role_name, labels, cluster_rules, name, namespace)
    for role_ns, rules in (namespaced_rules or {}).items():
        objs.append(role(role_name, role_ns, labels, rules))
        objs.append(role_binding(role_name, role_ns, labels, name, namespace))
    return objs
