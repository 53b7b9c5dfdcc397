"""The incremental structures the placement core keeps for speed, each against a recount
from scratch: ``BlockedNodes`` (a cycle's reserved nodes: indices, per-domain counts,
masked eligibility masks), the snapshot's name-ordered GPU buckets, name ranks and
cached capacity-fitting domains; and the placer's answers with a ``BlockedNodes`` equal
its answers with the same names as a plain set."""

from __future__ import annotations

from dataclasses import replace

from hypothesis import given
from hypothesis import strategies as st

from trainmaster.scheduler import GPU, BlockedNodes, ClusterState, Gang, place_gang
from trainmaster.scheduler.placement.reservation import reservation_target
from trainmaster.scheduler.state.blocked import BlockCache

from .builders import make_node, make_pod
from .test_properties import SETTINGS, clusters, gangs
from .test_reservation_target import full_scan_target


def _check_blocked(snap: ClusterState, blocked: BlockedNodes, names: set[str]) -> None:
    """Every view of ``blocked`` against a recount from ``names``."""
    assert set(blocked) == names and len(blocked) == len(names)
    known = {n for n in names if n in snap.node_index_map}
    indices = set(snap.indices(known))
    assert set(blocked.indices) == indices
    expected: dict[int, int] = {}
    for rank in range(1, len(snap.levels) + 2):
        for dom in snap.live_domains(rank):
            count = sum(1 for i in dom.nodes if i in indices)
            if count:
                expected[id(dom)] = count
            assert blocked.per_domain.get(id(dom), 0) == count
            outside = frozenset(snap.columns.nodes[i].name for i in dom.nodes) - names
            assert blocked.names_outside(dom.nodes) == outside
    assert {k: v for k, v in blocked.per_domain.items() if v} == expected
    n = len(snap.columns.nodes)
    for mask in (bytes([1]) * n, bytes(i % 2 for i in range(n))):
        want = bytes(0 if i in indices else mask[i] for i in range(n))
        assert bytes(blocked.masked(mask)) == want
        assert bytes(blocked.masked(mask)) == want  # the kept copy, asked again
    other = frozenset(list(snap.node_index_map)[:3])
    assert blocked.isdisjoint(other) == names.isdisjoint(other)


@SETTINGS
@given(clusters(), st.data())
def test_blocked_nodes_equal_a_recount(snap: ClusterState, data: st.DataObject) -> None:
    names = sorted(snap.node_index_map)
    pool = st.frozensets(st.sampled_from([*names, "not-a-node"]), max_size=len(names))
    cache = BlockCache(snap)
    kept: list[frozenset[str]] = []
    for cycle in range(3):
        blocked = BlockedNodes(snap, cache=cache)
        expected: set[str] = set()
        _check_blocked(snap, blocked, expected)
        # Reservations kept from the last cycle (same objects: cached), then new ones,
        # some overlapping (the name-by-name path) and some plain iterables.
        reservations = [r for r in kept if data.draw(st.booleans())]
        reservations += data.draw(st.lists(pool, max_size=4))
        for res in reservations:
            if data.draw(st.booleans()):
                blocked.update(res)
            else:
                blocked.update(list(res))
            expected |= res
            _check_blocked(snap, blocked, expected)
        kept = reservations
        cache.end_cycle()
        if cycle == 1:
            # A node change mid-way: the indices, counts and masks are rebuilt.
            victim = data.draw(st.sampled_from(names))
            node = snap.node(victim)
            snap.set_node(replace(node, unschedulable=not node.unschedulable))
            _check_blocked(snap, blocked, expected)
            snap.set_node(make_node("zz-new", gpus=8, topology=node.topology))
            _check_blocked(snap, blocked, expected)


@SETTINGS
@given(clusters(), st.data())
def test_gpu_bucket_order_and_name_ranks_equal_a_recount(
    snap: ClusterState, data: st.DataObject
) -> None:
    def check() -> None:
        buckets = snap.gpu_buckets
        order = snap.gpu_bucket_order
        nodes = snap.columns.nodes
        assert set(order) == set(buckets)
        for gpus, members in buckets.items():
            assert list(order[gpus]) == sorted((nodes[i].name, i) for i in members)
        by_name = sorted(range(len(nodes)), key=lambda i: nodes[i].name)
        assert [snap.name_ranks[i] for i in by_name] == list(range(len(nodes)))
        for rank in range(1, len(snap.levels) + 2):
            for totals in (((GPU, 8),), ((GPU, 16), ("cpu", 1_000))):
                want = [
                    d.name
                    for d in snap.live_domains(rank)
                    if all(d.capacity.get(r, 0) >= q for r, q in totals)
                ]
                assert [d.name for d in snap.domains_holding(rank, totals)] == want

    check()
    names = sorted(snap.node_index_map)
    steps = data.draw(st.lists(st.integers(0, 5), max_size=12))
    for k, step in enumerate(steps):
        name = data.draw(st.sampled_from(names))
        if step == 0:
            snap.add_bound(make_pod(f"x-{k}", gpus=data.draw(st.integers(1, 9)), cpu=0), name)
        elif step == 1 and snap.free(name).get(GPU, 0) >= 1:
            snap.assume(make_pod(f"a-{k}", gpus=1, cpu=0, memory=0), name)
        elif step == 2:
            for pod, _, _ in list(snap.pods())[:2]:
                snap.remove(pod.uid)
        elif step == 3:
            node = snap.node(name)
            snap.set_node(replace(node, unschedulable=not node.unschedulable))
        elif step == 4:
            new = f"a-new-{k}"
            snap.set_node(make_node(new, gpus=8, topology=snap.node(name).topology))
            names.append(new)
        elif len(names) > 1 and not any(n == name for _, n, _ in snap.pods()):
            snap.remove_node(name)
            names.remove(name)
        check()


@SETTINGS
@given(clusters(), gangs(), st.data())
def test_placer_answers_equal_with_blocked_nodes_and_with_names(
    snap: ClusterState, gang: Gang, data: st.DataObject
) -> None:
    names = sorted(snap.node_index_map)
    parts = data.draw(st.lists(st.frozensets(st.sampled_from(names)), max_size=3))
    plain: set[str] = set()
    blocked = BlockedNodes(snap, cache=BlockCache(snap))
    for part in parts:
        blocked.update(part)
        plain |= part
    assert place_gang(snap, gang, blocked=blocked) == place_gang(snap, gang, blocked=plain)
    target = reservation_target(snap, gang, blocked=blocked)
    assert target == reservation_target(snap, gang, blocked=plain)
    assert target == full_scan_target(snap, gang, plain)
