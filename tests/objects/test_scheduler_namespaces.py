"""`scheduler.namespaces`: the scheduler gets its bind rights in each served namespace (a
Role and RoleBinding there, never cluster-wide), its config lists them, and its reports
outside them are narrowed by an admission policy."""

from __future__ import annotations

from typing import Any

import yaml

from tests.helpers import STACKS
from trainmaster.objects import build_scheduler
from trainmaster.spec import ClusterSpec, load_spec


def _spec(namespaces: list[str]) -> ClusterSpec:
    doc = yaml.safe_load((STACKS / "dev" / "cluster.yaml").read_text())
    doc.setdefault("scheduler", {})["namespaces"] = namespaces
    return ClusterSpec.model_validate(doc)


def _binding_rights(objs: list[dict[str, Any]]) -> dict[str, set[str]]:
    """namespace (or `cluster`) -> resources the scheduler's bindings grant there."""
    roles = {(o["kind"], o["metadata"].get("namespace"), o["metadata"]["name"]): o
             for o in objs if o["kind"] in ("Role", "ClusterRole")}
    out: dict[str, set[str]] = {}
    for b in objs:
        if b["kind"] not in ("RoleBinding", "ClusterRoleBinding"):
            continue
        ns = b["metadata"].get("namespace")
        role = roles[(b["roleRef"]["kind"], ns if b["kind"] == "RoleBinding" else None,
                      b["roleRef"]["name"])]
        where = ns or "cluster"
        out.setdefault(where, set()).update(r for rule in role["rules"]
                                            for r in rule["resources"])
    return out


def test_bind_rights_are_rendered_in_each_served_namespace_only() -> None:
    objs = build_scheduler(_spec(["team-a", "trainmaster", "team-b"]))
    rights = _binding_rights(objs)
    for ns in ("trainmaster", "team-a", "team-b"):
        assert "pods/binding" in rights[ns], ns
    assert "pods/binding" not in rights["cluster"]
    assert set(rights) == {"cluster", "trainmaster", "team-a", "team-b", "trainmaster-system"}
    config = yaml.safe_load(next(o for o in objs if o["kind"] == "ConfigMap")
                            ["data"]["config.yaml"])
    assert config["namespaces"] == ["trainmaster", "team-a", "team-b"]
    policy = next(o for o in objs if o["kind"] == "ValidatingAdmissionPolicy")
    served = next(c["expression"] for c in policy["spec"]["matchConditions"]
                  if c["name"] == "not-served")
    assert served == '!(request.namespace in ["trainmaster", "team-a", "team-b"])'


def test_by_default_only_the_training_namespace_is_served() -> None:
    spec = load_spec(STACKS / "dev" / "cluster.yaml")
    objs = build_scheduler(spec)
    rights = _binding_rights(objs)
    assert [ns for ns, res in rights.items() if "pods/binding" in res] == ["trainmaster"]
    config = yaml.safe_load(next(o for o in objs if o["kind"] == "ConfigMap")
                            ["data"]["config.yaml"])
    assert config["namespaces"] == ["trainmaster"]
