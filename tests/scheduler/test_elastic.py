"""Elastic gangs in the core: admitted at the largest size that fits in [min, max], grown
later (behind every waiting gang), never below the minimum; the runtime's PodGroup to
gang mapping."""

from __future__ import annotations

import dataclasses

from trainmaster.scheduler import (
    ClusterState,
    Code,
    Cycle,
    Gang,
    GangScheduler,
    Placement,
    TopologyConstraint,
    TopologyMode,
)
from trainmaster.scheduler.runtime.config import SchedulerConfig
from trainmaster.scheduler.runtime.convert import pod_group_info
from trainmaster.scheduler.runtime.gangs import assemble

from .builders import LEVELS, fabric_nodes, make_gang, make_node, make_pod


class Binds:
    def __init__(self) -> None:
        self.placed: list[Placement] = []

    def bind(self, placement: Placement) -> None:
        self.placed.append(placement)


def _elastic(name: str, low: int, high: int, *, placed: int = 0, priority: int = 0,
             created: float = 0.0) -> Gang:
    gang = make_gang(name, high, gpus=8, cpu=0, memory=0, priority=priority, created=created)
    return dataclasses.replace(gang, min_member=low, elastic=True, placed=placed)


def _nodes(state: ClusterState, key: str) -> int:
    return state.placed_members(key)


def _state(nodes: int) -> ClusterState:
    return ClusterState([make_node(f"n{i}", gpus=8) for i in range(nodes)])


def test_admitted_at_the_largest_size_that_fits() -> None:
    state = _state(4)
    state.add_bound(make_pod("busy", gpus=8), "n0")
    sched = GangScheduler(state)
    sched.submit(_elastic("e", 2, 5))
    result = sched.run_cycle()
    (placement,) = result.placed
    assert len(placement.bindings) == 3  # 3 free nodes: more than min 2, less than max 5
    assert _nodes(state, "default/e") == 3


def test_not_admitted_below_the_minimum() -> None:
    state = _state(2)
    state.add_bound(make_pod("busy", gpus=8), "n0")
    sched = GangScheduler(state)
    sched.submit(_elastic("e", 2, 4))
    result = sched.run_cycle()
    assert not result.placed
    (failure,) = result.unschedulable
    assert failure.code is Code.UNSCHEDULABLE
    assert "2 pods" in failure.reason  # explained at its minimum
    assert _nodes(state, "default/e") == 0


def test_grow_binds_the_rest_when_capacity_frees() -> None:
    state = _state(3)
    busy = make_pod("busy", gpus=8)
    state.add_bound(busy, "n0")
    sched = GangScheduler(state)
    first = _elastic("e", 1, 3)
    sched.submit(first)
    (placement,) = sched.run_cycle().placed
    assert len(placement.bindings) == 2
    for b in placement.bindings:
        state.confirm(b.pod.uid)
    bound = {b.pod.uid for b in placement.bindings}
    rest = tuple(m for m in first.members if m.uid not in bound)
    grow = dataclasses.replace(first, members=rest, min_member=1, placed=2)
    assert grow.grows
    sched.submit(grow)
    assert not sched.run_cycle().placed  # no room yet: it stays pending
    state.remove(busy.uid)
    (more,) = sched.run_cycle().placed
    assert [b.node for b in more.bindings] == ["n0"]
    assert _nodes(state, "default/e") == 3


def test_waiting_gangs_at_their_minimum_come_before_any_grow() -> None:
    state = _state(2)
    sched = GangScheduler(state)
    # An old, high-priority job that runs and wants to grow, and a new rigid one.
    grow = _elastic("old", 1, 2, placed=1, priority=10, created=0.0)
    sched.submit(dataclasses.replace(grow, members=grow.members[:1]))
    sched.submit(make_gang("new", 2, gpus=8, cpu=0, memory=0, created=5.0))
    result = sched.run_cycle()
    assert [p.gang for p in result.placed] == ["default/new"]
    assert [f.gang for f in result.unschedulable] == ["default/old"]


def test_a_grow_is_never_offered_to_preemption() -> None:
    state = _state(1)
    state.add_bound(make_pod("low", gpus=8, priority=0), "n0")
    sched = GangScheduler(state)
    grow = _elastic("e", 1, 2, placed=1, priority=100)
    sched.submit(dataclasses.replace(grow, members=grow.members[:1]))

    class Never:
        NAME = "Never"
        asked: list[str] = []

        def post_filter(self, gang: Gang) -> object:
            self.asked.append(gang.key)
            raise AssertionError("a grow must not preempt")

    never = Never()
    Cycle(sched, Binds(), never).run()  # type: ignore[arg-type]
    assert never.asked == []


def test_topology_rules_apply_to_the_size_placed() -> None:
    # 2 leaves of 2 nodes; policy: up to 2 nodes required in a leaf, else anywhere.
    state = ClusterState(fabric_nodes(1, 2, 2), LEVELS)
    state.add_bound(make_pod("a", gpus=8), "s0-l0-n0")
    state.add_bound(make_pod("b", gpus=8), "s0-l1-n0")
    leaf = TopologyConstraint("leaf", TopologyMode.REQUIRED)
    anywhere = TopologyConstraint()
    gang = dataclasses.replace(_elastic("e", 2, 4), size_rules=((2, leaf), (None, anywhere)))
    sched = GangScheduler(state)
    sched.submit(gang)
    # 2 free nodes, one per leaf: size 2 must be in one leaf (no), size 3+ does not fit.
    assert not sched.run_cycle().placed
    sched.submit(dataclasses.replace(gang, size_rules=((1, leaf), (None, anywhere))))
    (placement,) = sched.run_cycle().placed  # size 2 may now spread over the leaves
    assert placement.level == "spine" and len(placement.bindings) == 2


def _group(min_member: int, max_members: int | None) -> dict[str, object]:
    annotations = {} if max_members is None else {
        "trainmaster.io/max-members": str(max_members)}
    return {"metadata": {"name": "g", "namespace": "default", "annotations": annotations},
            "spec": {"minMember": min_member}}


def test_assemble_an_elastic_group() -> None:
    config = SchedulerConfig(levels=LEVELS)
    members = [make_pod(f"g-{i}", gang="g") for i in range(4)]
    fresh = assemble("default/g", pod_group_info(_group(2, 4)), members, [], config)
    assert isinstance(fresh, Gang)
    assert fresh.elastic and fresh.required_members == 2 and not fresh.grows
    assert fresh.size_rules  # no topology annotation: the policy, by size placed
    node = make_node("n0", labels={"kubernetes.io/hostname": "n0"})
    grow = assemble("default/g", pod_group_info(_group(2, 4)), members[2:], [node, node],
                    config)
    assert isinstance(grow, Gang)
    assert grow.grows and grow.required_members == 1 and grow.placed == 2
    rigid = assemble("default/g", pod_group_info(_group(4, None)), members, [], config)
    assert isinstance(rigid, Gang) and not rigid.elastic
