"""Upstream composite (multi-level) groups, unit: a Workload's compositePodGroupTemplates
read, the children of one parent formed into one gang, and that gang placed level by
level (each child under one leaf, all of them under one spine). The live path (the real
control plane, the real scheduler) is tests/scheduler/test_composites_live.py."""

from __future__ import annotations

import asyncio
import dataclasses
from typing import Any

from tests.scheduler.apifake import Cluster, fake_runtime, node_obj, pod_obj
from trainmaster.scheduler import Gang, TopologyConstraint, TopologyMode, place_gang
from trainmaster.scheduler.framework.results import Placement, Unschedulable
from trainmaster.scheduler.runtime.cache import ClusterCache
from trainmaster.scheduler.runtime.composites import composite_object, composite_templates
from trainmaster.scheduler.runtime.config import SchedulerConfig

from .builders import make_cluster, make_pod

LEAF = "topology.trainmaster.io/leaf"
SPINE = "topology.trainmaster.io/spine"
CONFIG = SchedulerConfig(report_interval=0.0)
STATUS_PATH = "/apis/scheduling.k8s.io/v1beta1/namespaces/ns/podgroups/{}/status"


def workload(name: str = "trainer", *, min_groups: int = 2,
             children: tuple[str, ...] = ("replica",), key: str = SPINE) -> dict[str, Any]:
    child_templates = [{"name": c, "schedulingPolicy": {"gang": {"minCount": 4}},
                        "schedulingConstraints": {"topology": [{"key": LEAF}]}}
                       for c in children]
    return {"apiVersion": "scheduling.k8s.io/v1beta1", "kind": "Workload",
            "metadata": {"name": name, "namespace": "ns", "uid": f"wl-{name}",
                         "resourceVersion": "1"},
            "spec": {"compositePodGroupTemplates": [{
                "name": "all",
                "schedulingPolicy": {"gang": {"minGroupCount": min_groups}},
                "schedulingConstraints": {"topology": [{"key": key}]},
                "podGroupTemplates": child_templates}]}}


def child(name: str, parent: str = "trainer-all", template: str = "replica",
          min_count: int = 4) -> dict[str, Any]:
    return {"apiVersion": "scheduling.k8s.io/v1beta1", "kind": "PodGroup",
            "metadata": {"name": name, "namespace": "ns", "uid": f"up-{name}",
                         "resourceVersion": "1", "creationTimestamp": "2026-01-01T00:00:00Z"},
            "spec": {"parentCompositePodGroupName": parent,
                     "workloadRef": {"workloadName": "trainer", "templateName": template},
                     "schedulingPolicy": {"gang": {"minCount": min_count}},
                     "schedulingConstraints": {"topology": [{"key": LEAF}]}},
            "status": {}}


def member(name: str, group: str, gpus: int = 8) -> dict[str, Any]:
    return pod_obj(name, gpus=gpus, extra_spec={"schedulingGroup": {"podGroupName": group}})


def test_templates_name_the_composite_that_directly_holds_them() -> None:
    nested = workload(children=("a", "b"))
    nested["spec"]["compositePodGroupTemplates"][0]["compositePodGroupTemplates"] = [{
        "name": "inner", "schedulingPolicy": {"basic": {}},
        "podGroupTemplates": [{"name": "c", "schedulingPolicy": {"gang": {"minCount": 1}}}]}]
    found = composite_templates(nested)
    assert sorted(found) == ["a", "b", "c"]
    assert (found["a"].name, found["a"].min_group_count) == ("all", 2)
    assert found["a"].constraints == {"topology": [{"key": SPINE}]}
    assert (found["c"].name, found["c"].min_group_count) == ("inner", 0)
    plain = {"spec": {"podGroupTemplates": [{"name": "x"}]}}
    assert composite_templates(plain) == {}


def composite_gang(children: int, pods: int, gpus: int) -> Gang:
    members = tuple(
        dataclasses.replace(make_pod(f"r{c}-{p}", gpus=gpus, gang="c"), part=f"r{c}")
        for c in range(children) for p in range(pods))
    return Gang(name="c", members=members, part_level="leaf", parts_share=True,
                whole_level="spine", topology=TopologyConstraint("spine", TopologyMode.REQUIRED))


def spines_and_leaves(placement: Placement) -> tuple[set[str], dict[str, set[str]]]:
    """Node names are s{S}-l{L}-n{N}: the spine is s{S}, the leaf s{S}-l{L}."""
    leaves: dict[str, set[str]] = {}
    for b in placement.bindings:
        leaves.setdefault(b.pod.part, set()).add(b.node.rsplit("-", 1)[0])
    return {b.node.split("-")[0] for b in placement.bindings}, leaves


def test_each_child_under_one_leaf_and_the_whole_under_one_spine() -> None:
    snap = make_cluster(2, 2, 4)
    # spine 0 keeps one whole leaf free, spine 1 both: two children of a leaf each only
    # fit together under spine 1, although spine 0 alone has room for one of them.
    snap.assume(make_pod("busy", gpus=1, cpu=0, memory=0), "s0-l0-n0")
    result = place_gang(snap, composite_gang(2, 4, 8))
    assert isinstance(result, Placement), result
    spines, leaves = spines_and_leaves(result)
    assert spines == {"s1"}
    assert sorted(leaves) == ["r0", "r1"]
    assert all(len(v) == 1 for v in leaves.values())
    assert (result.level, result.domain) == ("spine", "spine-1")
    assert [p.name for p, _, _ in snap.pods()] == ["busy"]  # snapshot unchanged


def test_children_may_share_a_leaf() -> None:
    snap = make_cluster(1, 1, 4)  # one spine, one leaf: both children must share it
    result = place_gang(snap, composite_gang(2, 2, 8))
    assert isinstance(result, Placement), result
    _, leaves = spines_and_leaves(result)
    assert leaves["r0"] == leaves["r1"]


def test_refused_whole_when_no_spine_holds_every_child() -> None:
    snap = make_cluster(2, 2, 4)
    for s in (0, 1):
        snap.assume(make_pod(f"busy{s}", gpus=1, cpu=0, memory=0), f"s{s}-l0-n0")
    result = place_gang(snap, composite_gang(2, 4, 8))
    assert isinstance(result, Unschedulable)
    assert "fits in no single spine" in result.reason
    assert "part r1 fits in no leaf left" in result.reason
    assert [p.name for p, _, _ in snap.pods()] == ["busy0", "busy1"]


def _conditions(calls: list[tuple[str, str, Any]], name: str) -> list[dict[str, Any]]:
    return [body["status"]["conditions"][0] for method, path, body in calls
            if method == "PATCH" and path == STATUS_PATH.format(name)]


def children_of_trainer_all(count: int, pods_each: int
                            ) -> tuple[list[dict[str, Any]], list[dict[str, Any]]]:
    """`count` child PodGroups of the composite trainer-all, `pods_each` pods (and minCount)
    each: pods r<child>-<i>."""
    pods = [member(f"r{c}-{p}", f"trainer-all-{c}") for c in range(count)
            for p in range(pods_each)]
    return pods, [child(f"trainer-all-{c}", min_count=pods_each) for c in range(count)]


def nodes() -> list[dict[str, Any]]:
    """2 spines x 2 leaves x 2 nodes; spine-0's leaf-0 has one node only."""
    out = []
    for s in (0, 1):
        for leaf in (0, 1):
            for n in (0, 1):
                if (s, leaf, n) != (0, 0, 1):
                    out.append(node_obj(f"s{s}-l{leaf}-n{n}", spine=f"spine-{s}",
                                        leaf=f"leaf-{s}{leaf}"))
    return out


def test_runtime_forms_one_gang_of_the_children_and_reports_on_each() -> None:
    pods, groups = children_of_trainer_all(2, 2)
    cluster = Cluster(nodes(), pods, [], groups, workloads=[workload()])
    api, rt = fake_runtime(cluster, CONFIG)

    async def run() -> None:
        await rt.start()
        assert "ns/scheduling.k8s.io:composite:trainer-all" in rt.cache.groups
        await rt.step()
        await rt.idle()
        await rt.writer.drain(1)
        assert sorted(cluster.binds) == ["r0-0", "r0-1", "r1-0", "r1-1"]
        labels = {p: rt.cache.nodes[n].labels for p, n in cluster.binds.items()}
        assert len({lb[SPINE] for lb in labels.values()}) == 1
        assert {lb[SPINE] for lb in labels.values()} == {"spine-1"}  # spine-0 is short
        for c in range(2):
            assert len({labels[f"r{c}-{p}"][LEAF] for p in range(2)}) == 1
            (done,) = _conditions(api.calls, f"trainer-all-{c}")
            assert (done["type"], done["status"]) == ("PodGroupInitiallyScheduled", "True")
        await rt.shutdown()

    asyncio.run(run())


def test_children_wait_for_the_workload_and_for_min_group_count() -> None:
    pods = [member(f"r0-{p}", "trainer-all-0") for p in range(2)]
    cluster = Cluster(nodes(), pods, [], [child("trainer-all-0", min_count=2)])
    api, rt = fake_runtime(cluster, CONFIG)

    async def run() -> None:
        await rt.start()
        await rt.step()
        await rt.idle()
        await rt.writer.drain(1)
        assert cluster.binds == {}
        (waiting,) = _conditions(api.calls, "trainer-all-0")[-1:]
        assert waiting["status"] == "False"
        assert ("waiting for CompositePodGroup ns/trainer-all (scheduling.k8s.io/v1alpha3) "
                "or Workload ns/trainer") in waiting["message"]
        rt.cache.on_workload("ADDED", workload())  # minGroupCount 2, one child exists
        await rt.step()
        await rt.idle()
        await rt.writer.drain(1)
        assert cluster.binds == {}
        assert "1 of minGroupCount 2 PodGroups exist" in \
            _conditions(api.calls, "trainer-all-0")[-1]["message"]
        await rt.shutdown()

    asyncio.run(run())


def test_pods_follow_their_podgroup_into_and_out_of_its_composite() -> None:
    """Pods pending before their PodGroup (or its Workload) arrives are re-keyed into the
    composite's gang when it does, and back out when the PodGroup goes."""
    cache = ClusterCache(SchedulerConfig())
    for obj in nodes():
        cache.on_node("ADDED", obj)
    cache.build_snapshot()
    for p in range(2):
        cache.on_pod("ADDED", member(f"r0-{p}", "trainer-all-0"))
    assert set(cache.members) == {"ns/scheduling.k8s.io:trainer-all-0"}

    cache.on_upstream_group("ADDED", child("trainer-all-0", min_count=2))
    composite = "ns/scheduling.k8s.io:composite:trainer-all"
    assert set(cache.members) == {composite}
    parts = {cache.pending[uid].request.part for uid in cache.members[composite]}
    assert parts == {"trainer-all-0"}
    assert "or Workload ns/trainer" in (cache.groups[composite].problem or "")
    cache.on_workload("ADDED", workload(min_groups=1))
    group = cache.groups[composite]
    assert group.problem is None
    assert (group.min_member, group.part_level, group.whole_level) == (2, "leaf", "spine")
    assert group.children == ("trainer-all-0",)

    cache.on_upstream_group("DELETED", child("trainer-all-0", min_count=2))
    assert set(cache.members) == {"ns/scheduling.k8s.io:trainer-all-0"}
    assert composite not in cache.groups


# --- the v1alpha3 CompositePodGroup object ------------------------------------------------

COMPOSITE_STATUS_PATH = ("/apis/scheduling.k8s.io/v1alpha3/namespaces/ns/compositepodgroups/"
                         "{}/status")


def composite_pod_group(name: str = "trainer-all", *, min_groups: int = 2, key: str = SPINE,
                        scheduled: bool = False) -> dict[str, Any]:
    """A CompositePodGroup as the API server serves it (spec fields as in its OpenAPI)."""
    status: dict[str, Any] = {"conditions": [{
        "type": "CompositePodGroupInitiallyScheduled", "status": "True",
        "reason": "Scheduled"}]} if scheduled else {}
    return {"apiVersion": "scheduling.k8s.io/v1alpha3", "kind": "CompositePodGroup",
            "metadata": {"name": name, "namespace": "ns", "uid": f"cpg-{name}",
                         "resourceVersion": "1"},
            "spec": {"workloadRef": {"workloadName": "trainer", "templateName": "all"},
                     "schedulingPolicy": {"gang": {"minGroupCount": min_groups}},
                     "schedulingConstraints": {"topology": [{"key": key}]}},
            "status": status}


def _composite_conditions(calls: list[tuple[str, str, Any]], name: str) -> list[dict[str, Any]]:
    return [body["status"]["conditions"][0] for method, path, body in calls
            if method == "PATCH" and path == COMPOSITE_STATUS_PATH.format(name)]


def test_a_composite_pod_group_reads_as_its_policy_and_constraint() -> None:
    found = composite_object(composite_pod_group(min_groups=3, key=LEAF))
    assert (found.name, found.min_group_count, found.object_name) == ("all", 3, "trainer-all")
    assert found.constraints == {"topology": [{"key": LEAF}]}
    assert not found.object_scheduled
    assert composite_object(composite_pod_group(scheduled=True)).object_scheduled
    basic = composite_pod_group()
    basic["spec"]["schedulingPolicy"] = {"basic": {}}
    assert composite_object(basic).min_group_count == 0


def test_the_composite_pod_group_wins_over_the_workloads_template_and_is_reported_on() -> None:
    cache = ClusterCache(SchedulerConfig())
    for obj in nodes():
        cache.on_node("ADDED", obj)
    cache.build_snapshot()
    composite = "ns/scheduling.k8s.io:composite:trainer-all"
    cache.on_upstream_group("ADDED", child("trainer-all-0", min_count=2))
    # no Workload: the object alone is enough
    cache.on_composite_object("ADDED", composite_pod_group(min_groups=1))
    group = cache.groups[composite]
    assert group.problem is None
    assert (group.part_level, group.whole_level) == ("leaf", "spine")
    assert group.composite_object == "trainer-all"
    # a Workload whose template says otherwise: the object still decides
    cache.on_workload("ADDED", workload(min_groups=5, key=LEAF))
    assert cache.groups[composite].problem is None
    assert cache.groups[composite].whole_level == "spine"
    # the object gone: the Workload's template applies
    cache.on_composite_object("DELETED", composite_pod_group(min_groups=1))
    group = cache.groups[composite]
    assert "1 of minGroupCount 5 PodGroups exist" in (group.problem or "")
    assert group.composite_object == ""
    # an object already reported True is not written again
    cache.on_composite_object("ADDED", composite_pod_group(min_groups=1, scheduled=True))
    assert cache.groups[composite].composite_object == ""
    bad = composite_pod_group(min_groups=1, key="example.com/rack")
    cache.on_composite_object("MODIFIED", bad)
    assert "CompositePodGroup ns/trainer-all: schedulingConstraints.topology key" in (
        cache.groups[composite].invalid or "")


def test_a_composite_pod_group_is_placed_level_by_level_and_gets_its_condition() -> None:
    pods, groups = children_of_trainer_all(2, 2)
    # no Workload at all: the CompositePodGroup carries the policy and the spine constraint
    cluster = Cluster(nodes(), pods, [], groups, composites=[composite_pod_group()])
    api, rt = fake_runtime(cluster, CONFIG)

    async def run() -> None:
        await rt.start()
        await rt.step()
        await rt.idle()
        await rt.writer.drain(1)
        assert sorted(cluster.binds) == ["r0-0", "r0-1", "r1-0", "r1-1"]
        labels = {p: rt.cache.nodes[n].labels for p, n in cluster.binds.items()}
        assert {lb[SPINE] for lb in labels.values()} == {"spine-1"}  # spine-0 is short
        for c in range(2):
            assert len({labels[f"r{c}-{p}"][LEAF] for p in range(2)}) == 1
        (done,) = _composite_conditions(api.calls, "trainer-all")
        assert (done["type"], done["status"], done["reason"]) == (
            "CompositePodGroupInitiallyScheduled", "True", "Scheduled")
        assert [c["status"] for c in _conditions(api.calls, "trainer-all-0")] == ["True"]
        await rt.shutdown()

    asyncio.run(run())


def test_a_composite_pod_group_that_cannot_fit_says_so_and_binds_nothing() -> None:
    pods, groups = children_of_trainer_all(3, 4)
    # 3 children of a leaf each, under one spine of 2 leaves: never all of it
    cluster = Cluster(nodes(), pods, [], groups,
                      composites=[composite_pod_group(min_groups=3)])
    api, rt = fake_runtime(cluster, CONFIG)

    async def run() -> None:
        await rt.start()
        await rt.step()
        await rt.idle()
        await rt.writer.drain(1)
        assert cluster.binds == {}
        (waiting,) = _composite_conditions(api.calls, "trainer-all")[-1:]
        assert (waiting["type"], waiting["status"], waiting["reason"]) == (
            "CompositePodGroupInitiallyScheduled", "False", "Unschedulable")
        assert "spine" in waiting["message"], waiting
        await rt.shutdown()

    asyncio.run(run())
