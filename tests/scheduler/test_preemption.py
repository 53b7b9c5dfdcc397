"""Victim selection (``select_victims``): whole gangs, least cost, minimal sets."""

from __future__ import annotations

from typing import Any

from hypothesis import given, settings
from hypothesis import strategies as st

from trainmaster.scheduler import ClusterState, Gang
from trainmaster.scheduler.placement.place import Placement, place_gang
from trainmaster.scheduler.placement.victims import select_victims
from trainmaster.scheduler.plugins import DEFAULT_FILTERS, DEFAULT_SCORER
from trainmaster.scheduler.plugins.preemption import Preemption, Victim, set_cost

from .builders import LEVELS, fabric_nodes, make_gang, make_pod


def _running(snap: ClusterState, name: str, nodes: list[str], *, gpus: int = 8,
             priority: int = 0, work: float = 0.0, borrowed: bool = False) -> Victim:
    pods = []
    for i, node in enumerate(nodes):
        pod = make_pod(f"{name}-{i}", gpus=gpus, gang=name, priority=priority)
        snap.add_bound(pod, node)
        pods.append((pod, node))
    return Victim(f"default/{name}", priority, tuple(pods), work, borrowed)


def _select(snap: ClusterState, gang_size: int, victims: list[Victim],
            level: str = "leaf") -> Preemption | None:
    gang = make_gang("big", gang_size, gpus=8, level=level, mode="required", priority=100)
    return select_victims(snap, gang, victims, filters=DEFAULT_FILTERS, scorer=DEFAULT_SCORER)


def test_a_required_leaf_is_freed_at_the_least_lost_work_whatever_the_priorities() -> None:
    # 1 spine x 2 leaves x 2 nodes, full: leaf-0 holds low (prio 1, 10 GPU-s lost),
    # leaf-1 two prio-0 gangs, one with much work since its checkpoint. Priority only
    # says who may be a victim (all three here); lost work says which and where.
    snap = ClusterState(fabric_nodes(1, 2, 2), LEVELS)
    low = _running(snap, "low", ["s0-l0-n0", "s0-l0-n1"], priority=1, work=10.0)
    busy = _running(snap, "busy", ["s0-l1-n0"], priority=0, work=1e6)
    cheap = _running(snap, "cheap", ["s0-l1-n1"], priority=0, work=5.0)
    found = _select(snap, 2, [low, busy, cheap])
    assert found is not None
    assert [v.gang for v in found.victims] == ["default/low"]
    assert found.domain == "spine-0/leaf-0" and found.nodes == {"s0-l0-n0", "s0-l0-n1"}
    assert found.work_lost == 10.0 and found.exact
    # the live snapshot is untouched
    assert snap.pod_state(busy.pods[0][0].uid) is not None


def test_a_gang_without_a_required_level_keeps_the_priority_order() -> None:
    # The same cluster, a preferred gang: lowest priority first, as before.
    snap = ClusterState(fabric_nodes(1, 2, 2), LEVELS)
    low = _running(snap, "low", ["s0-l0-n0", "s0-l0-n1"], priority=1, work=10.0)
    busy = _running(snap, "busy", ["s0-l1-n0"], priority=0, work=1e6)
    cheap = _running(snap, "cheap", ["s0-l1-n1"], priority=0, work=5.0)
    gang = make_gang("big", 2, gpus=8, level="leaf", mode="preferred", priority=100)
    found = select_victims(snap, gang, [low, busy, cheap], filters=DEFAULT_FILTERS,
                           scorer=DEFAULT_SCORER)
    assert found is not None
    assert {v.gang for v in found.victims} == {"default/busy", "default/cheap"}


def test_nothing_is_evicted_when_no_set_makes_the_gang_fit() -> None:
    snap = ClusterState(fabric_nodes(1, 2, 2), LEVELS)
    a = _running(snap, "a", ["s0-l0-n0"])
    b = _running(snap, "b", ["s0-l1-n0"])
    # 3 nodes in one leaf do not exist: required leaf can never fit
    assert _select(snap, 3, [a, b]) is None


def test_the_smaller_set_is_kept_when_one_gang_alone_frees_the_domain() -> None:
    snap = ClusterState(fabric_nodes(1, 2, 2), LEVELS)
    small1 = _running(snap, "s1", ["s0-l0-n0"], work=1.0)
    small2 = _running(snap, "s2", ["s0-l0-n1"], work=1.0)
    whole = _running(snap, "whole", ["s0-l1-n0", "s0-l1-n1"], work=3.0)
    found = _select(snap, 2, [small1, small2, whole])
    assert found is not None
    assert {v.gang for v in found.victims} == {"default/s1", "default/s2"}
    assert set_cost(found.victims) == (0, 2.0, 16)


def test_victims_spanning_the_domain_are_evicted_whole_and_priced_whole() -> None:
    # wide spans both leaves (cheap per node, but all of it is lost); leaf-1's own
    # gang costs less than wide's whole: leaf-1 is freed, wide is not touched.
    snap = ClusterState(fabric_nodes(1, 2, 2), LEVELS)
    wide = _running(snap, "wide", ["s0-l0-n0", "s0-l1-n0"], work=8.0)
    own0 = _running(snap, "own0", ["s0-l0-n1"], work=1.0)
    own1 = _running(snap, "own1", ["s0-l1-n1"], work=3.0)
    found = _select(snap, 1, [wide, own0, own1])
    assert found is not None and [v.gang for v in found.victims] == ["default/own0"]
    found = _select(snap, 2, [wide, own0, own1])
    assert found is not None
    assert {v.gang for v in found.victims} == {"default/wide", "default/own0"}
    assert found.domain == "spine-0/leaf-0" and found.work_lost == 9.0


@settings(max_examples=40, deadline=None)
@given(st.lists(st.tuples(st.integers(0, 3), st.integers(0, 3), st.integers(0, 50)),
                min_size=1, max_size=8),
       st.integers(1, 4))
def test_chosen_set_fits_is_minimal_and_loses_the_least_work_of_any_set(
    spec: list[tuple[int, int, int]], size: int
) -> None:
    """Gangs of one node each on a 1x2x4 fabric; each spec entry is (node, priority,
    work). The preemptor needs ``size`` whole nodes in one leaf."""
    snap = ClusterState(fabric_nodes(1, 2, 4), LEVELS)
    names = [n.name for n in snap.nodes]
    victims = []
    used: set[str] = set()
    for i, (slot, prio, work) in enumerate(spec):
        node = names[(slot + i) % len(names)]
        if node in used:
            continue
        used.add(node)
        victims.append(_running(snap, f"v{i}", [node], priority=prio, work=float(work)))
    found = _select(snap, size, victims)

    def fits_without(evicted: list[Victim]) -> bool:
        sim = snap.copy()
        for v in evicted:
            for pod, _ in v.pods:
                sim.remove(pod.uid)
        gang = make_gang("big", size, gpus=8, level="leaf", mode="required", priority=100)
        return isinstance(place_gang(sim, gang), Placement)

    if fits_without([]):
        assert found is None
        return
    if found is None:
        assert not fits_without(victims)
        return
    chosen = list(found.victims)
    assert fits_without(chosen)
    for v in chosen:  # minimal: keeping any one of them breaks the fit
        assert not fits_without([c for c in chosen if c is not v])
    # exhaustive: no set that makes the gang fit loses less work
    lost = sum(v.work_lost for v in chosen)
    for mask in range(1, 1 << len(victims)):
        subset = [v for k, v in enumerate(victims) if mask >> k & 1]
        if sum(v.work_lost for v in subset) < lost:
            assert not fits_without(subset)
    # and every victim sits in the one leaf the gang is placed in
    leaf = {n.rsplit("-", 1)[0] for n in found.nodes}
    assert {node.rsplit("-", 1)[0] for v in chosen for _, node in v.pods} == leaf


def test_evictable_and_work_lost() -> None:
    from trainmaster.scheduler import Victim
    from trainmaster.scheduler.plugins.preemption import evictable, work_lost

    low = Victim("low", 1, ())
    assert evictable(low, 2) and not evictable(low, 1)
    assert evictable(Victim("borrower", 9, (), borrowed=True), 1)
    assert work_lost(1000.0, 900.0, 16) == 1600.0
    assert work_lost(1000.0, 1200.0, 16) == 0.0  # a checkpoint after now loses nothing


def test_the_victim_search_uses_the_placer_it_is_given() -> None:
    # The simulator passes its baseline policies: every fit test goes through them.
    snap = ClusterState(fabric_nodes(1, 2, 2), LEVELS)
    low = _running(snap, "low", ["s0-l0-n0", "s0-l0-n1"], priority=1)
    other = _running(snap, "other", ["s0-l1-n0", "s0-l1-n1"], priority=1, work=5.0)
    asked: list[str] = []

    def counting(snapshot: ClusterState, gang: Gang, **kwargs: Any) -> Any:
        asked.append(gang.key)
        return place_gang(snapshot, gang, **kwargs)

    gang = make_gang("big", 2, gpus=8, level="leaf", mode="required", priority=100)
    found = select_victims(snap, gang, [low, other], filters=DEFAULT_FILTERS,
                           scorer=DEFAULT_SCORER, placer=counting)
    assert found is not None and [v.gang for v in found.victims] == ["default/low"]
    assert len(asked) >= 3  # as things are, after one eviction, after pruning


def test_shrinking_an_elastic_gang_is_cheaper_than_stopping_a_rigid_one() -> None:
    # One leaf of 4 nodes, full: an elastic gang (min 2) on 3 nodes with much work since
    # its checkpoint, and a rigid gang on 1 with a little. A 1-node gang of higher
    # priority takes one of the elastic gang's members above its minimum: a rescale.
    from trainmaster.scheduler import elastic_parts, rescale_cost

    snap = ClusterState(fabric_nodes(1, 1, 4), LEVELS)
    elastic = _running(snap, "el", ["s0-l0-n0", "s0-l0-n1", "s0-l0-n2"], work=1e6)
    rigid = _running(snap, "rigid", ["s0-l0-n3"], work=5_000.0)
    above, rest = elastic_parts(elastic, 2)
    assert above.shrink and len(above.pods) == 1 and above.pods[0][0].name == "el-2"
    assert above.work_lost == rescale_cost(24) and rest.work_lost == 1e6
    found = _select(snap, 1, [above, rest, rigid])
    assert found is not None
    assert [(v.gang, v.shrink) for v in found.victims] == [("default/el", True)]
    assert found.nodes == {"s0-l0-n2"}


def test_an_elastic_gang_is_stopped_only_with_its_members_above_the_minimum() -> None:
    # The preemptor needs 3 whole nodes: the elastic gang (min 1, on 3) must go entirely,
    # its surplus and its rest together; never the rest alone.
    from trainmaster.scheduler import elastic_parts

    snap = ClusterState(fabric_nodes(1, 1, 3), LEVELS)
    elastic = _running(snap, "el", ["s0-l0-n0", "s0-l0-n1", "s0-l0-n2"], work=0.0)
    above, rest = elastic_parts(elastic, 1)
    # rest (work 0) is cheaper than the rescale: the search must still take above first
    found = _select(snap, 3, [rest, above])
    assert found is not None
    assert sorted((v.shrink, len(v.pods)) for v in found.victims) == [(False, 1), (True, 2)]
    # and a gang needing 2 nodes is served by the shrink alone
    found = _select(snap, 2, [rest, above])
    assert found is not None and [v.shrink for v in found.victims] == [True]
