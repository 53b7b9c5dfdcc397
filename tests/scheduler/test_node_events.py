"""Node add/update/remove applied to the snapshot in O(that node) leave exactly the state
and the decisions a full rebuild (``replace_nodes``) leaves."""

from __future__ import annotations

from collections.abc import Mapping

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from trainmaster.scheduler import (
    DEFAULT_FILTERS,
    GPU,
    ClusterState,
    NodeInfo,
    NodeSelectorRequirement,
    PodRequest,
    SelectorOperator,
    Taint,
    TaintEffect,
    Toleration,
    TolerationOperator,
    TopologyMode,
    place_gang,
)
from trainmaster.scheduler.placement.reservation import reservation_target

from .builders import LEVELS, make_gang, make_node, make_pod

SETTINGS = settings(
    max_examples=120,
    deadline=None,
    suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large],
)
TAINTS = (
    Taint("dedicated", "infra", TaintEffect.NO_SCHEDULE),
    Taint("gpu", "yes", TaintEffect.NO_SCHEDULE),
    Taint("soft", "x", TaintEffect.PREFER_NO_SCHEDULE),
)
NAMES = [f"n{i:02d}" for i in range(14)]

# Pods whose filter answers the snapshot caches: each kind of built-in filter.
PROBES = (
    make_pod("plain", gpus=1),
    make_pod("sel", gpus=2, selector={"pool": "a"}),
    make_pod("aff", gpus=1, affinity=(
        NodeSelectorRequirement("pool", SelectorOperator.IN, ("a", "b")),
        NodeSelectorRequirement("zone", SelectorOperator.DOES_NOT_EXIST, ()),
    )),
    make_pod("notin", gpus=1, affinity=(
        NodeSelectorRequirement("pool", SelectorOperator.NOT_IN, ("b",)),
        NodeSelectorRequirement("zone", SelectorOperator.EXISTS, ()),
    )),
    make_pod("tol", gpus=4, tolerations=(Toleration("gpu", TolerationOperator.EXISTS),)),
)


@st.composite
def node_specs(draw: st.DrawFn, name: str) -> NodeInfo:
    labels: dict[str, str] = {"kubernetes.io/hostname": name}
    pool = draw(st.sampled_from([None, "a", "b"]))
    if pool:
        labels["pool"] = pool
    if draw(st.booleans()):
        labels["zone"] = draw(st.sampled_from(["z1", "z2"]))
    topology = draw(st.sampled_from([
        ("s0", "l0"), ("s0", "l1"), ("s1", "l2"), ("s1", "l0"), ("s0",), (),
    ]))
    return make_node(
        name,
        gpus=draw(st.sampled_from([0, 4, 8])),
        labels=labels,
        taints=draw(st.lists(st.sampled_from(TAINTS), max_size=2, unique=True)),
        unschedulable=draw(st.integers(0, 5)) == 0,
        topology=topology,
        requested=draw(st.sampled_from([{}, {GPU: 1}, {"cpu": 4_000}])),
    )


Op = tuple[str, str, NodeInfo | None]


@st.composite
def scenarios(draw: st.DrawFn) -> tuple[list[NodeInfo], list[tuple[str, int]], list[Op]]:
    """Initial nodes, pods (node name, GPUs), then a sequence of node events."""
    first = draw(st.lists(st.sampled_from(NAMES), min_size=1, max_size=8, unique=True))
    nodes = [draw(node_specs(n)) for n in first]
    pods = draw(st.lists(st.tuples(st.sampled_from(first), st.sampled_from([1, 2])),
                         max_size=10))
    ops: list[Op] = []
    for _ in range(draw(st.integers(1, 12))):
        kind = draw(st.sampled_from(["set", "set", "remove", "pods"]))
        name = draw(st.sampled_from(NAMES))
        ops.append((kind, name, draw(node_specs(name)) if kind == "set" else None))
    return nodes, pods, ops


def _nonzero(values: Mapping[str, int]) -> dict[str, int]:
    return {k: v for k, v in values.items() if v}


def state_of(snap: ClusterState) -> dict[str, object]:
    """Everything observable by name (zero quantities and absent ones are the same)."""
    cols = snap.columns
    names = [n.name for n in cols.nodes]
    assert snap.indices(names) == list(range(len(names)))  # name -> index is consistent
    domains = {
        level: [(d.name, d.nodes, _nonzero(d.free), _nonzero(d.capacity))
                for d in snap.domains(level)]
        for level in snap.level_names
    }
    live = {
        rank: [(d.name, sorted(names[i] for i in d.nodes), _nonzero(d.free),
                _nonzero(d.capacity)) for d in snap.live_domains(rank)]
        for rank in range(1, len(snap.level_names))
    }
    eligibility = {}
    for pod in PROBES:
        elig = snap.eligibility(pod, DEFAULT_FILTERS)
        eligibility[pod.name] = sorted(
            (names[i], elig.mask[i], elig.reasons[i]) for i in range(len(names))
        )
    return {
        "nodes": snap.nodes,
        "by_index": sorted(
            (names[i], dict(cols.allocatable[i]), _nonzero(cols.requested[i]), cols.free[i],
             cols.capacity[i], cols.schedulable[i])
            for i in range(len(names))
        ),
        "by_name": {n.name: (_nonzero(snap.requested(n.name)), dict(snap.free(n.name)))
                    for n in snap.nodes},
        "domains": domains,
        "live": live,
        "max_capacity": _nonzero(snap.max_capacity),
        "buckets": {k: sorted(names[i] for i in v) for k, v in snap.gpu_buckets.items()},
        "pods": sorted((p.uid, node, state) for p, node, state in snap.pods()),
        "eligibility": eligibility,
        "domain_of": {(n.name, lv): snap.domain_of(n.name, lv)
                      for n in snap.nodes for lv in snap.level_names},
    }


def naive_eligibility(snap: ClusterState, pod: PodRequest) -> list[tuple[int, str | None]]:
    """Every filter on every node, one by one (what the indexes must reproduce)."""
    out: list[tuple[int, str | None]] = []
    for node in snap.columns.nodes:
        if node.unschedulable:
            out.append((0, "node(s) were unschedulable"))
            continue
        for plugin in DEFAULT_FILTERS:
            if not plugin.applies(pod):
                continue
            status = plugin.filter(pod, node)
            if not status.is_success():
                out.append((0, status.message))
                break
        else:
            out.append((1, None))
    return out


def decisions_of(snap: ClusterState) -> list[object]:
    out: list[object] = []
    for size, gpus, level, mode in ((1, 4, "node", TopologyMode.PREFERRED),
                                    (3, 2, "leaf", TopologyMode.PREFERRED),
                                    (4, 4, "leaf", TopologyMode.REQUIRED),
                                    (6, 8, "spine", TopologyMode.PREFERRED)):
        gang = make_gang("g", size, gpus=gpus, level=level, mode=mode)
        out.append(place_gang(snap, gang))
        out.append(reservation_target(snap, gang))
        sel = make_gang("s", size, gpus=1, level=level, mode=mode, selector={"pool": "a"})
        out.append(place_gang(snap, sel))
    return out


@SETTINGS
@given(scenarios())
def test_node_events_match_a_rebuild(
    scenario: tuple[list[NodeInfo], list[tuple[str, int]], list[Op]],
) -> None:
    nodes, pods, ops = scenario
    snap = ClusterState(nodes, LEVELS)
    specs = {n.name: n for n in nodes}
    for k, (node, gpus) in enumerate(pods):
        snap.add_bound(make_pod(f"p{k}", gpus=gpus, cpu=1000), node)
    state_of(snap)  # warm the filter-answer cache: node events must patch it
    for kind, name, spec in ops:
        if kind == "set":
            assert spec is not None
            snap.set_node(spec)
            specs[name] = spec
        elif kind == "pods":  # a pod comes and goes between node events
            if name in specs:
                pod = make_pod(f"q-{name}", gpus=1, cpu=500)
                snap.add_bound(pod, name)
                if len(ops) % 2:
                    snap.remove(pod.uid)
        elif name in specs and len(specs) > 1:
            for pod, node, _ in list(snap.pods()):
                if node == name:
                    snap.remove(pod.uid)
            snap.remove_node(name)
            del specs[name]
        # The reference: the same pods on a snapshot rebuilt from the node list.
        rebuilt = ClusterState(specs.values(), LEVELS)
        for pod, node, _ in snap.pods():
            rebuilt.add_bound(pod, node)
        assert state_of(snap) == state_of(rebuilt)
        for probe in PROBES:
            elig = snap.eligibility(probe, DEFAULT_FILTERS)
            assert list(zip(elig.mask, elig.reasons, strict=True)) == naive_eligibility(
                snap, probe
            )
        assert decisions_of(snap) == decisions_of(rebuilt)
        assert state_of(snap.copy()) == state_of(rebuilt)


def test_remove_node_refuses_a_node_with_pods() -> None:
    snap = ClusterState([make_node("a"), make_node("b")])
    snap.assume(make_pod("p"), "a")
    with pytest.raises(ValueError, match="tracked pod"):
        snap.remove_node("a")
    with pytest.raises(KeyError, match="unknown node"):
        snap.remove_node("zz")
    snap.remove("default/p")
    snap.remove_node("a")
    assert [n.name for n in snap.nodes] == ["b"]


def test_an_added_node_takes_the_next_index_and_ties_still_break_by_name() -> None:
    snap = ClusterState([make_node("b"), make_node("c")])
    snap.set_node(make_node("a"))
    assert [n.name for n in snap.columns.nodes] == ["b", "c", "a"]
    assert [n.name for n in snap.nodes] == ["a", "b", "c"]
    decision = place_gang(snap, make_gang("g", 1, gpus=8, level="node"))
    assert [b.node for b in decision.bindings] == ["a"]  # type: ignore[union-attr]


def test_pods_follow_a_node_moved_by_a_removal() -> None:
    snap = ClusterState([make_node("a"), make_node("b"), make_node("c")])
    pod = PodRequest("p", requests={GPU: 3})
    snap.assume(pod, "c")
    snap.remove_node("a")  # "c" takes index 0
    assert snap.pod_node(pod.uid) == "c"
    assert snap.free("c")[GPU] == 5
    snap.forget(pod.uid)
    assert snap.free("c")[GPU] == 8
