"""A component's identity: a ServiceAccount bound to a ClusterRole of exactly its rules."""

from __future__ import annotations

from typing import Any


def service_account_with_cluster_role(
    name: str,
    namespace: str,
    labels: dict[str, str],
    rules: list[dict[str, Any]],
    role_name: str | None = None,
) -> list[dict[str, Any]]:
    role = role_name or name
    return [
        {
            "apiVersion": "v1",
            "kind": "ServiceAccount",
            "metadata": {"name": name, "namespace": namespace, "labels": labels},
        },
        {
            "apiVersion": "rbac.authorization.k8s.io/v1",
            "kind": "ClusterRole",
            "metadata": {"name": role, "labels": labels},
            "rules": rules,
        },
        {
            "apiVersion": "rbac.authorization.k8s.io/v1",
            "kind": "ClusterRoleBinding",
            "metadata": {"name": role, "labels": labels},
            "roleRef": {
                "apiGroup": "rbac.authorization.k8s.io",
                "kind": "ClusterRole",
                "name": role,
            },
            "subjects": [{"kind": "ServiceAccount", "name": name, "namespace": namespace}],
        },
    ]
