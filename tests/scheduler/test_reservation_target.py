"""``reservation_target`` (bucket walk at the node rank, first packing domain in answer
order above it) against the full scan it replaced, kept here as the reference."""

from __future__ import annotations

from collections.abc import Collection
from dataclasses import replace

from hypothesis import given
from hypothesis import strategies as st

from trainmaster.scheduler import GPU, ClusterState, Gang, GangScheduler, TopologyMode
from trainmaster.scheduler.placement.reservation import ReservationTarget, reservation_target
from trainmaster.scheduler.placement.search import Search as _Search
from trainmaster.scheduler.placement.search import last_rank as _last_rank
from trainmaster.scheduler.placement.search import min_depth as _min_depth
from trainmaster.scheduler.plugins import DEFAULT_FILTERS, DEFAULT_SCORER

from .builders import GIB, LEVELS, make_gang, make_node, make_pod
from .test_properties import SETTINGS, TOLERATE_ALL, clusters, gangs


def full_scan_target(
    snapshot: ClusterState, gang: Gang, blocked: Collection[str] = ()
) -> ReservationTarget | None:
    """The implementation before the fast path: every node at the node rank, every
    capacity-fitting domain packed at the others, then the most free one, ties by name."""
    if not gang.members or len(gang.members) < gang.required_members:
        return None
    try:
        cap_rank, last = _last_rank(snapshot, gang)
    except ValueError:
        return None
    required = gang.topology.mode is TopologyMode.REQUIRED
    node_depth = _min_depth(snapshot, cap_rank) if required else 0
    search = _Search(snapshot, gang, DEFAULT_FILTERS, DEFAULT_SCORER, blocked)
    masks = [g.mask for g in search.groups]
    for g in search.groups:
        g.static_mask = g.mask
    primary = search.primary
    cols = snapshot.columns
    nodes = cols.nodes
    for rank in range(last + 1):
        fitting: list[tuple[int, str, tuple[int, ...]]] = []
        if rank == 0:
            for i, cap in enumerate(cols.capacity):
                if (
                    cols.schedulable[i]
                    and all(m[i] for m in masks)
                    and len(nodes[i].topology) >= node_depth
                    and all(cap.get(r, 0) >= q for r, q in search.total_items)
                ):
                    fitting.append((max(cols.free[i].get(primary, 0), 0), nodes[i].name, (i,)))
        else:
            for dom in search.candidates(rank, static=True):
                if search.pack(dom.nodes, cols.capacity, static=True) is not None:
                    fitting.append((dom.free.get(primary, 0), dom.name, dom.nodes))
        if fitting:
            _, name, members = min(fitting, key=lambda f: (-f[0], f[1]))
            return ReservationTarget(
                snapshot.level_names[rank],
                name,
                frozenset(nodes[i].name for i in members) - set(blocked),
            )
    return None


@st.composite
def cpu_gangs(draw: st.DrawFn) -> Gang:
    """No GPUs: the primary resource is CPU, so the node rank takes the scan path."""
    return make_gang(
        "c",
        draw(st.integers(1, 6)),
        gpus=0,
        cpu=draw(st.sampled_from([1_000, 16_000, 40_000])),
        memory=GIB,
        level=draw(st.sampled_from(["node", "leaf", "spine", "cluster"])),
        mode=draw(st.sampled_from(["required", "preferred"])),
        tolerations=TOLERATE_ALL if draw(st.booleans()) else (),
    )


@SETTINGS
@given(clusters(), st.one_of(gangs(), cpu_gangs()), st.data())
def test_fast_target_equals_full_scan(
    snap: ClusterState, gang: Gang, data: st.DataObject
) -> None:
    names = [n.name for n in snap.nodes]
    # Overcommit some nodes (negative free counts as 0) and free some pods again, so the
    # GPU buckets have been moved incrementally, not only built.
    for k, name in enumerate(data.draw(st.lists(st.sampled_from(names), max_size=4))):
        snap.add_bound(make_pod(f"over-{k}", gpus=data.draw(st.integers(1, 9)), cpu=0), name)
    for pod, _, _ in list(snap.pods()):
        if data.draw(st.integers(0, 5)) == 0:
            snap.remove(pod.uid)
    blocked = data.draw(st.sets(st.sampled_from(names), max_size=len(names)))
    assert reservation_target(snap, gang, blocked=blocked) == full_scan_target(
        snap, gang, blocked
    )
    assert reservation_target(snap, gang) == full_scan_target(snap, gang)


def test_node_rank_ties_by_name_and_skips_blocked() -> None:
    """Two nodes with the same free GPUs: the name decides; blocked, the other wins."""
    nodes = [make_node(n, gpus=8, topology=("spine-0", "leaf-0")) for n in ("b", "a", "c")]
    snap = ClusterState(nodes, ("spine", "leaf"))
    snap.add_bound(make_pod("busy", gpus=6, cpu=0), "c")
    gang = make_gang("g", 1, gpus=8, level="node", mode="required")
    target = reservation_target(snap, gang)
    assert target is not None and target.domain == "a"
    blocked_a = reservation_target(snap, gang, blocked={"a"})
    assert blocked_a is not None and blocked_a.domain == "b"
    only_c = reservation_target(snap, gang, blocked={"a", "b"})
    assert only_c is not None and only_c.domain == "c" and only_c.nodes == {"c"}
    assert snap.columns.free[snap.indices(["c"])[0]][GPU] == 2


def test_reservation_kept_until_a_node_change_makes_it_unusable() -> None:
    """The scheduler re-checks a kept reservation's nodes only when a node changed
    (``node_version``); a cordon inside it still moves the reservation."""
    nodes = [
        make_node(f"l{leaf}-n{n}", gpus=8, topology=("spine-0", f"leaf-{leaf}"))
        for leaf in range(2)
        for n in range(2)
    ]
    snap = ClusterState(nodes, LEVELS)
    for node in nodes:  # leaf-0 nodes keep 4 free GPUs, leaf-1 nodes none
        snap.add_bound(make_pod(f"busy-{node.name}", gpus=4 if "l0" in node.name else 8,
                                cpu=0), node.name)
    now = [0.0]
    sched = GangScheduler(snap, clock=lambda: now[0], starvation_after=300.0)
    sched.submit(make_gang("big", 2, gpus=8, level="leaf", mode="required"))
    assert sched.run_cycle().reservations == ()
    now[0] = 400.0
    first = sched.run_cycle().reservations
    assert [r.domain for r in first] == ["spine-0/leaf-0"]
    version = snap.node_version
    snap.add_bound(make_pod("late", gpus=1, cpu=0), "l1-n0")  # pods do not move it
    snap.remove(make_pod("late", gpus=1, cpu=0).uid)
    assert snap.node_version == version
    assert sched.run_cycle().reservations[0] is first[0]
    snap.set_node(replace(nodes[0], unschedulable=True))
    assert snap.node_version != version
    moved = sched.run_cycle().reservations
    assert [r.domain for r in moved] == ["spine-0/leaf-1"]
