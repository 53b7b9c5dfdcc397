"""`scheduler.localQueues` rendered: a LocalQueue object per entry (Kueue's shape, in
trainmaster's group, its CRD generated from the spec model), a Role for the team in each
namespace that resolves through them (no binding), the scheduler's read right and its
config key; nothing of it for a spec without LocalQueues. The team Role grants exactly
the rights docs/security.md lists."""

from __future__ import annotations

from typing import Any

import yaml

from tests.helpers import STACKS
from tests.security.documented import Right, documented_rights, with_optional_identities
from trainmaster.api import API_VERSION, LOCALQUEUE_KIND
from trainmaster.objects import all_crds, build_all, grants
from trainmaster.objects._local_queues import TENANT_RULES, tenant_role_name
from trainmaster.objects._rbac import RBAC_API, RBAC_GROUP
from trainmaster.spec import ClusterSpec


def _spec(local_queues: list[dict[str, str]], namespaces: list[str]) -> ClusterSpec:
    doc = yaml.safe_load((STACKS / "dev" / "cluster.yaml").read_text())
    doc["scheduler"].update(namespaces=namespaces, localQueues=local_queues)
    return ClusterSpec.model_validate(doc)


def _config(objs: list[dict[str, Any]]) -> dict[str, Any]:
    cm = next(o for o in objs if o["kind"] == "ConfigMap"
              and o["metadata"]["name"].endswith("-config"))
    return dict(yaml.safe_load(cm["data"]["config.yaml"]))


TEAMS = _spec([{"name": "lq-a", "namespace": "team-a", "clusterQueue": "research"},
               {"name": "default", "namespace": "team-a", "clusterQueue": "default"},
               {"name": "lq-b", "namespace": "team-b", "clusterQueue": "research"}],
              ["team-a", "team-b", "team-c"])


def test_local_queue_objects_are_rendered_in_the_team_namespaces() -> None:
    objs = build_all(TEAMS)["scheduler"]
    lqs = [o for o in objs if o["kind"] == LOCALQUEUE_KIND]
    assert [(o["apiVersion"], o["metadata"]["namespace"], o["metadata"]["name"], o["spec"])
            for o in lqs] == [
        (API_VERSION, "team-a", "lq-a", {"clusterQueue": "research"}),
        (API_VERSION, "team-a", "default", {"clusterQueue": "default"}),
        (API_VERSION, "team-b", "lq-b", {"clusterQueue": "research"})]
    for o in lqs:
        assert o["metadata"]["labels"]["app.kubernetes.io/component"] == "local-queue"
        assert o["metadata"]["labels"]["app.kubernetes.io/managed-by"] == "trainmaster"
    # Every served namespace but the cluster's resolves through LocalQueues (team-c too:
    # with none there, its gangs are told so instead of picking a queue themselves).
    assert _config(objs)["localQueueNamespaces"] == ["team-a", "team-b", "team-c"]


def test_each_team_namespace_gets_the_role_and_nobody_is_bound_to_it() -> None:
    objs = build_all(TEAMS)["scheduler"]
    name = tenant_role_name(TEAMS)
    roles = {o["metadata"]["namespace"]: o for o in objs
             if o["kind"] == "Role" and o["metadata"]["name"] == name}
    assert sorted(roles) == ["team-a", "team-b", "team-c"]
    assert all(r["rules"] == TENANT_RULES for r in roles.values())
    assert not [o for o in objs if o["kind"] in ("RoleBinding", "ClusterRoleBinding")
                and o["roleRef"]["name"] == name]
    assert not [o for o in objs if o["kind"] == "ClusterRole" and o["metadata"]["name"] == name]


def test_the_scheduler_reads_local_queues_in_the_team_namespaces_only() -> None:
    objs = build_all(TEAMS)["scheduler"]
    rights = [g for g in grants(objs) if g.account == "trainmaster-system/trainmaster-scheduler"
              and g.resource == "localqueues"]
    assert [(g.scope, g.api_group, g.verbs) for g in rights] == [
        (ns, "trainmaster.io", ("get", "list", "watch")) for ns in ("team-a", "team-b", "team-c")]


def test_a_spec_without_local_queues_renders_none_of_it() -> None:
    spec = _spec([], ["team-a"])
    objs = build_all(spec)["scheduler"]
    assert not [o for o in objs if o["kind"] == LOCALQUEUE_KIND]
    assert not [o for o in objs if o["metadata"]["name"] == tenant_role_name(spec)]
    assert "localQueueNamespaces" not in _config(objs)


def test_the_crd_is_namespaced_and_generated_from_the_spec_model() -> None:
    crd = next(c for c in all_crds() if c["spec"]["names"]["kind"] == LOCALQUEUE_KIND)
    assert crd["metadata"]["name"] == "localqueues.trainmaster.io"
    assert crd["spec"]["scope"] == "Namespaced"
    assert crd["spec"]["names"]["shortNames"] == ["lq"]
    version = crd["spec"]["versions"][0]
    spec = version["schema"]["openAPIV3Schema"]["properties"]["spec"]
    assert spec["required"] == ["clusterQueue"]
    assert spec["properties"]["clusterQueue"]["pattern"] == "^[a-z0-9]([-a-z0-9]*[a-z0-9])?$"
    assert [c["jsonPath"] for c in version["additionalPrinterColumns"]] == [
        ".spec.clusterQueue", ".metadata.creationTimestamp"]
    assert crd in build_all(TEAMS)["crds"]


def test_every_right_in_a_team_namespace_is_the_documented_one() -> None:
    """The team account bound to the Role, the scheduler and the in-cluster UI (its
    optional identity on): nobody else holds a right in the namespace."""
    spec = with_optional_identities(
        _spec([{"name": "lq-a", "namespace": "team-a", "clusterQueue": "research"}],
              ["team-a"]))
    binding = {"apiVersion": RBAC_API, "kind": "RoleBinding",
               "metadata": {"name": "alice", "namespace": "team-a"},
               "roleRef": {"apiGroup": RBAC_GROUP, "kind": "Role",
                           "name": tenant_role_name(spec)},
               "subjects": [{"kind": "ServiceAccount", "name": "alice",
                             "namespace": "team-a"}]}
    rendered = {Right(g.account, g.scope, g.api_group, g.resource, frozenset(g.verbs),
                      frozenset(g.names))
                for objs in build_all(spec).values()
                for g in grants([*objs, binding]) if g.scope == "team-a"}
    documented = set(documented_rights("tenant-grants"))
    assert sorted(map(str, rendered - documented)) == [], "granted, not documented"
    assert sorted(map(str, documented - rendered)) == [], "documented, not granted"
