"""Ways to break the RBAC rules on the dev stack's rendered objects: each returns the
`where` the finding must name (see test_rules.VIOLATIONS)."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from tests.policies.builders import find

Objects = list[dict[str, Any]]
OPERATOR_ROLE = "Role trainmaster/dev-operator"
SCHEDULER_CLUSTER_ROLE = "ClusterRole dev-trainmaster-scheduler"
TRAINER_ROLE = "Role trainmaster/gpt-small-trainer"


def _role(objects: Objects, kind: str, name: str, namespace: str | None = None) -> Any:
    for obj in objects:
        meta = obj["metadata"]
        if obj["kind"] == kind and meta["name"] == name and meta.get("namespace") == namespace:
            return obj
    raise KeyError(f"{kind} {namespace}/{name}")


def wildcard(field: str) -> Callable[[Objects], str]:
    def change(objects: Objects) -> str:
        rules = _role(objects, "Role", "dev-operator", "trainmaster")["rules"]
        rules[0][field] = ["*"]
        return f"{OPERATOR_ROLE}: rules[0].{field}"

    return change


def trainer_role_to_default(objects: Objects) -> str:
    binding = find(objects, "RoleBinding", "gpt-small-trainer")
    binding["subjects"] = [
        {"kind": "ServiceAccount", "name": "default", "namespace": "trainmaster"}
    ]
    return "RoleBinding trainmaster/gpt-small-trainer: subjects[0]"


def scheduler_to_all_accounts(objects: Objects) -> str:
    binding = find(objects, "ClusterRoleBinding", "dev-trainmaster-scheduler")
    binding["subjects"].append({"kind": "Group", "name": "system:serviceaccounts:trainmaster"})
    return "ClusterRoleBinding dev-trainmaster-scheduler: subjects[1]"


def operator_jobs_cluster_wide(objects: Objects) -> str:
    """The old layout: the operator's namespaced rights in its ClusterRole."""
    role = _role(objects, "ClusterRole", "dev-operator")
    role["rules"].append({"apiGroups": ["batch"], "resources": ["jobs"], "verbs": ["create"]})
    return f"ClusterRole dev-operator: rules[{len(role['rules']) - 1}].resources"


def scheduler_binds_everywhere(objects: Objects) -> str:
    role = _role(objects, "ClusterRole", "dev-trainmaster-scheduler")
    role["rules"].append({"apiGroups": [""], "resources": ["pods/binding"], "verbs": ["create"]})
    return f"{SCHEDULER_CLUSTER_ROLE}: rules[{len(role['rules']) - 1}].resources"


def scheduler_writes_pods_everywhere(objects: Objects) -> str:
    """pods may be read cluster-wide (node accounting), not written."""
    role = _role(objects, "ClusterRole", "dev-trainmaster-scheduler")
    pods = next(r for r in role["rules"] if r["resources"] == ["pods"])
    pods["verbs"].append("delete")
    return f"{SCHEDULER_CLUSTER_ROLE}: rules[{role['rules'].index(pods)}].resources"


def binds_cluster_admin(objects: Objects) -> str:
    binding = find(objects, "ClusterRoleBinding", "dev-operator")
    binding["roleRef"]["name"] = "cluster-admin"
    return "ClusterRoleBinding dev-operator: roleRef.name"


def trainer_reads(resource: str) -> Callable[[Objects], str]:
    def change(objects: Objects) -> str:
        rules = find(objects, "Role", "gpt-small-trainer")["rules"]
        rules.append({"apiGroups": [""], "resources": [resource], "verbs": ["get", "create"]})
        return f"{TRAINER_ROLE}: rules[{len(rules) - 1}].resources"

    return change


def operator_may(verb: str) -> Callable[[Objects], str]:
    def change(objects: Objects) -> str:
        rules = _role(objects, "Role", "dev-operator", "trainmaster")["rules"]
        rules.append(
            {"apiGroups": ["rbac.authorization.k8s.io"], "resources": ["roles"], "verbs": [verb]}
        )
        return f"{OPERATOR_ROLE}: rules[{len(rules) - 1}].verbs"

    return change
