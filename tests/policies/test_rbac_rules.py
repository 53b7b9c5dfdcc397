"""The RBAC rules' edges: what they allow on purpose, and how they read what they judge."""

from __future__ import annotations

import copy
from typing import Any

from policies import get_rule, rendered_objects
from tests.policies.builders import stack


def _objects() -> list[dict[str, Any]]:
    return copy.deepcopy(rendered_objects(stack()))


def test_scheduler_may_read_every_pod_cluster_wide() -> None:
    """Node accounting needs every pod; the rule allows exactly reads of pods/PodGroups."""
    objects = _objects()
    role = next(
        o
        for o in objects
        if o["kind"] == "ClusterRole" and o["metadata"]["name"] == "dev-trainmaster-scheduler"
    )
    assert {"apiGroups": [""], "resources": ["pods"], "verbs": ["get", "list", "watch"]} in role[
        "rules"
    ]
    assert get_rule("rbac-namespaced-rights-in-roles")(stack(), objects) == []


def test_cluster_role_bound_in_one_namespace_is_namespaced() -> None:
    """A ClusterRole granted by a RoleBinding gives rights in that namespace only."""
    objects = _objects()
    objects.append(
        {
            "apiVersion": "rbac.authorization.k8s.io/v1",
            "kind": "ClusterRole",
            "metadata": {"name": "x"},
            "rules": [{"apiGroups": ["batch"], "resources": ["jobs"], "verbs": ["create"]}],
        }
    )
    objects.append(
        {
            "apiVersion": "rbac.authorization.k8s.io/v1",
            "kind": "RoleBinding",
            "metadata": {"name": "x", "namespace": "trainmaster"},
            "roleRef": {
                "apiGroup": "rbac.authorization.k8s.io",
                "kind": "ClusterRole",
                "name": "x",
            },
            "subjects": [{"kind": "ServiceAccount", "name": "x", "namespace": "trainmaster"}],
        }
    )
    assert get_rule("rbac-namespaced-rights-in-roles")(stack(), objects) == []


def test_trainer_findings_name_their_job() -> None:
    objects = _objects()
    role = next(
        o for o in objects if o["kind"] == "Role" and o["metadata"]["name"] == "gpt-small-trainer"
    )
    role["rules"][0]["verbs"] = ["*"]
    [finding] = get_rule("rbac-no-wildcards")(stack(), objects)
    assert finding.job == "gpt-small"


def test_malformed_rbac_yields_findings_or_nothing() -> None:
    """Rules see hand-written objects too: wrong types never raise."""
    junk = [
        {"kind": "Role", "metadata": {"name": "r"}, "rules": "nope"},
        {"kind": "Role", "metadata": None, "rules": [None, {"verbs": 3}]},
        {
            "kind": "ClusterRoleBinding",
            "metadata": {"name": "b"},
            "roleRef": None,
            "subjects": [None, {"kind": "ServiceAccount"}],
        },
        {"kind": "RoleBinding", "subjects": {"kind": "Group"}},
    ]
    for rule_id in (
        "rbac-no-wildcards",
        "rbac-no-default-serviceaccount",
        "rbac-namespaced-rights-in-roles",
        "rbac-no-dangerous-rights",
    ):
        get_rule(rule_id)(None, junk)
