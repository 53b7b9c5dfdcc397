"""Property tests: the placement core checked against a brute-force reference.

The reference below uses only public, per-node functions (static filters, ``fit_count``,
``free``): for a gang of identical pods, a set of nodes can hold it iff the per-node
pod counts add up to the gang size.
"""

from __future__ import annotations

from collections import defaultdict
from collections.abc import Iterable
from dataclasses import replace

from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from trainmaster.scheduler import (
    GPU,
    ClusterState,
    Gang,
    GangScheduler,
    NodeInfo,
    Placement,
    PodRequest,
    Taint,
    TaintEffect,
    Toleration,
    TolerationOperator,
    TopologyMode,
    Unschedulable,
    fit_count,
    place_gang,
)
from trainmaster.scheduler.plugins.node_affinity import matches_affinity
from trainmaster.scheduler.plugins.node_selector import matches_node_selector
from trainmaster.scheduler.plugins.taint_toleration import untolerated_taint
from trainmaster.scheduler.runtime.queue import queue_key

from .builders import GIB, LEVELS, make_gang, make_node, make_pod

SETTINGS = settings(
    max_examples=150,
    deadline=None,
    suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large],
)
TAINT = Taint("dedicated", "infra", TaintEffect.NO_SCHEDULE)
TOLERATE_ALL = (Toleration(operator=TolerationOperator.EXISTS),)


# --- strategies -----------------------------------------------------------------------


@st.composite
def clusters(draw: st.DrawFn) -> ClusterState:
    spines = draw(st.integers(1, 3))
    leaves = draw(st.integers(1, 3))
    per_leaf = draw(st.integers(1, 4))
    rare = st.integers(0, 7).map(lambda x: x == 0)
    nodes: list[NodeInfo] = []
    for s in range(spines):
        for leaf in range(leaves):
            for n in range(per_leaf):
                nodes.append(
                    make_node(
                        f"s{s}-l{leaf}-n{n}",
                        gpus=draw(st.sampled_from([4, 8])),
                        cpu=64_000,
                        labels={"gpu": draw(st.sampled_from(["h100", "a100"]))},
                        taints=(TAINT,) if draw(rare) else (),
                        unschedulable=draw(rare),
                        topology=(f"spine-{s}", f"leaf-{leaf}"),
                    )
                )
    snap = ClusterState(nodes, LEVELS)
    for node in nodes:
        used = draw(st.integers(0, node.allocatable[GPU]))
        if used:
            snap.add_bound(make_pod(f"pre-{node.name}", gpus=used, cpu=0, memory=0), node.name)
    return snap


@st.composite
def gangs(draw: st.DrawFn, name: str = "g", created: float = 0.0) -> Gang:
    return make_gang(
        name,
        draw(st.integers(1, 8)),
        gpus=draw(st.sampled_from([1, 2, 4, 8])),
        cpu=1_000,
        memory=GIB,
        level=draw(st.sampled_from(["node", "leaf", "spine", "cluster"])),
        mode=draw(st.sampled_from(["required", "preferred"])),
        selector=draw(st.sampled_from([None, {"gpu": "h100"}])),
        tolerations=TOLERATE_ALL if draw(st.booleans()) else (),
        priority=draw(st.integers(0, 2)),
        created=created,
    )


# --- reference ------------------------------------------------------------------------


def static_ok(pod: PodRequest, node: NodeInfo) -> bool:
    return (
        not node.unschedulable
        and matches_node_selector(pod.node_selector, node.labels)
        and matches_affinity(pod.affinity, node.labels)
        and untolerated_taint(node.taints, pod.tolerations) is None
    )


def room(snap: ClusterState, pod: PodRequest, nodes: Iterable[str]) -> int:
    items = tuple(pod.effective_requests.items())
    return sum(fit_count(items, snap.free(n)) for n in nodes if static_ok(pod, snap.node(n)))


def fitting_domains(snap: ClusterState, gang: Gang, level: str) -> list[tuple[int, str]]:
    """(free GPUs, name) of every domain at ``level`` that can hold the (uniform) gang."""
    pod, size = gang.members[0], len(gang.members)
    if level == "node":
        return [
            (snap.free(n.name).get(GPU, 0), n.name)
            for n in snap.nodes
            if room(snap, pod, [n.name]) >= size
        ]
    return [
        (d.free.get(GPU, 0), d.name)
        for d in snap.domains(level)
        if room(snap, pod, d.nodes) >= size
    ]


def allowed_levels(snap: ClusterState, gang: Gang) -> list[str]:
    names = list(snap.level_names)
    if gang.topology.mode is TopologyMode.REQUIRED:
        return names[: names.index(gang.topology.level) + 1]
    return names


def renamed(gang: Gang, name: str, created: float = 0.0) -> Gang:
    members = tuple(
        replace(p, name=f"{name}-{j}", uid="", gang=name) for j, p in enumerate(gang.members)
    )
    return replace(gang, name=name, members=members, creation_timestamp=created)


def state(snap: ClusterState) -> dict[str, dict[str, int]]:
    return {n.name: dict(snap.free(n.name)) for n in snap.nodes}


# --- properties -----------------------------------------------------------------------


@SETTINGS
@given(clusters(), st.lists(gangs(), min_size=1, max_size=6))
def test_never_overcommits(snap: ClusterState, batch: list[Gang]) -> None:
    charged: dict[str, dict[str, int]] = defaultdict(lambda: defaultdict(int))
    for pod, where, _ in snap.pods():
        for r, q in pod.effective_requests.items():
            charged[where][r] += q
    for i, gang in enumerate(batch):
        result = place_gang(snap, renamed(gang, f"g{i}"))
        if isinstance(result, Placement):
            for b in result.bindings:
                snap.assume(b.pod, b.node)  # raises OvercommitError on overcommit
                for r, q in b.pod.effective_requests.items():
                    charged[b.node][r] += q
    for node in snap.nodes:
        for resource, qty in charged[node.name].items():
            assert qty <= node.allocatable.get(resource, 0), (node.name, resource)
            assert snap.requested(node.name).get(resource, 0) == qty


@SETTINGS
@given(clusters(), gangs())
def test_all_or_nothing_and_pure(snap: ClusterState, gang: Gang) -> None:
    before = state(snap)
    result = place_gang(snap, gang)
    assert state(snap) == before
    if isinstance(result, Placement):
        uids = [b.pod.uid for b in result.bindings]
        assert sorted(uids) == sorted(p.uid for p in gang.members)
        assert all(static_ok(b.pod, snap.node(b.node)) for b in result.bindings)
    else:
        assert isinstance(result, Unschedulable)
        assert result.gang == gang.key


@SETTINGS
@given(clusters(), st.lists(gangs(), min_size=1, max_size=5))
def test_smallest_domain_and_best_fit(snap: ClusterState, batch: list[Gang]) -> None:
    for i, gang in enumerate(batch):
        gang = renamed(gang, f"g{i}")
        result = place_gang(snap, gang)
        levels = allowed_levels(snap, gang)
        if isinstance(result, Unschedulable):
            assert all(not fitting_domains(snap, gang, level) for level in levels)
            continue
        rank = levels.index(result.level)
        for smaller in levels[:rank]:
            assert not fitting_domains(snap, gang, smaller), f"{smaller} would have fit"
        best = min(fitting_domains(snap, gang, result.level))
        assert result.domain == best[1]
        assert {snap.domain_of(b.node, result.level) for b in result.bindings} == {result.domain}
        for b in result.bindings:  # later gangs see this one's usage
            snap.assume(b.pod, b.node)


@SETTINGS
@given(clusters(), gangs())
def test_required_constraint_never_violated(snap: ClusterState, gang: Gang) -> None:
    constraint = gang.topology
    result = place_gang(snap, gang)
    if constraint.mode is not TopologyMode.REQUIRED or not isinstance(result, Placement):
        return
    assert snap.rank(result.level) <= snap.rank(constraint.level)
    domains = {snap.domain_of(b.node, constraint.level) for b in result.bindings}
    assert len(domains) == 1
    assert None not in domains


@SETTINGS
@given(clusters(), st.lists(st.tuples(st.integers(0, 15), st.sampled_from([1, 2, 4, 8]))))
def test_assume_forget_roundtrip(snap: ClusterState, ops: list[tuple[int, int]]) -> None:
    before = state(snap)
    leaves_before = [(d.name, dict(d.free)) for d in snap.domains("leaf")]
    nodes = [n.name for n in snap.nodes]
    assumed: list[str] = []
    for i, (node_idx, gpus) in enumerate(ops):
        pod = make_pod(f"p{i}", gpus=gpus, cpu=0, memory=0)
        node = nodes[node_idx % len(nodes)]
        if snap.free(node).get(GPU, 0) >= gpus:
            snap.assume(pod, node)
            assumed.append(pod.uid)
    for uid in reversed(assumed):
        snap.forget(uid)
    assert state(snap) == before
    assert [(d.name, dict(d.free)) for d in snap.domains("leaf")] == leaves_before


@SETTINGS
@given(clusters(), st.lists(gangs(), min_size=2, max_size=6), st.data())
def test_scheduler_cycles_respect_reservations(
    snap: ClusterState, batch: list[Gang], data: st.DataObject
) -> None:
    now = [0.0]
    sched = GangScheduler(snap, clock=lambda: now[0], starvation_after=10.0)
    submitted: dict[str, Gang] = {}
    for i, g in enumerate(batch):
        gang = renamed(g, f"g{i}", created=float(i))
        submitted[gang.key] = gang
        sched.submit(gang)
    for _ in range(4):
        cycle = sched.run_cycle()
        for placement in cycle.placed:
            holder_keys = [
                r
                for r in cycle.reservations
                if queue_key(submitted[r.gang]) < queue_key(submitted[placement.gang])
            ]
            for reservation in holder_keys:
                assert not {b.node for b in placement.bindings} & reservation.nodes
        for node in snap.nodes:
            for resource, qty in snap.requested(node.name).items():
                if resource == GPU:
                    assert qty <= node.allocatable[GPU]
        # some running pods finish, time passes
        running = [pod.uid for pod, _, _ in snap.pods()]
        for uid in running:
            if data.draw(st.booleans()):
                snap.remove(uid)
        now[0] += 7.0
