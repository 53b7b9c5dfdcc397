"""Pending pods + PodGroups -> the core's gangs (minMember, topology, finishing a gang)."""

from __future__ import annotations

from tests.scheduler.builders import make_node, make_pod
from trainmaster.scheduler import SchedulerConfig, SelectorOperator, TopologyMode
from trainmaster.scheduler.framework.model import TopologyConstraint
from trainmaster.scheduler.runtime.convert import PodGroupInfo
from trainmaster.scheduler.runtime.gangs import Waiting, assemble, gang_key_of, lone_gang

CONFIG = SchedulerConfig()


def group(min_member: int, topology: TopologyConstraint | None = None) -> PodGroupInfo:
    return PodGroupInfo("default", "g", "uid", min_member, topology, 5.0)


def test_pods_wait_for_their_pod_group() -> None:
    result = assemble("default/g", None, [make_pod("a", gang="g")], [], CONFIG)
    assert isinstance(result, Waiting) and "PodGroup default/g" in result.reason


def test_gang_from_group_uses_policy_when_unannotated() -> None:
    pods = [make_pod(f"p{i}", gang="g") for i in range(4)]
    gang = assemble("default/g", group(4), pods, [], CONFIG)
    assert not isinstance(gang, Waiting)
    assert gang.key == "default/g" and gang.required_members == 4
    assert gang.topology == TopologyConstraint("leaf", TopologyMode.PREFERRED)
    assert gang.creation_timestamp == 5.0


def test_placed_members_count_towards_min_member_and_pin_required_gangs() -> None:
    pods = [make_pod(f"p{i}", gang="g") for i in range(2)]
    placed = [make_node("n1", labels={"topology.trainmaster.io/leaf": "leaf-3"})] * 3
    gang = assemble("default/g", group(5, TopologyConstraint("leaf", TopologyMode.REQUIRED)),
                    pods, placed, CONFIG)
    assert not isinstance(gang, Waiting)
    assert gang.min_member == 2
    term = gang.members[0].affinity[-1]
    assert term.key == "topology.trainmaster.io/leaf"
    assert term.operator is SelectorOperator.IN and term.values == ("leaf-3",)


def test_preferred_or_split_gangs_are_not_pinned() -> None:
    pods = [make_pod("p0", gang="g")]
    spread = [make_node("a", labels={"topology.trainmaster.io/leaf": "leaf-1"}),
              make_node("b", labels={"topology.trainmaster.io/leaf": "leaf-2"})]
    required = group(3, TopologyConstraint("leaf", TopologyMode.REQUIRED))
    gang = assemble("default/g", required, pods, spread, CONFIG)
    assert not isinstance(gang, Waiting) and gang.members[0].affinity == ()
    preferred = group(3, TopologyConstraint("leaf", TopologyMode.PREFERRED))
    gang = assemble("default/g", preferred, pods, spread[:1], CONFIG)
    assert not isinstance(gang, Waiting) and gang.members[0].affinity == ()


def test_lone_pods_never_collide_with_a_group_of_the_same_name() -> None:
    pod = make_pod("g")
    assert gang_key_of(pod) == "default/pod:g" != gang_key_of(make_pod("x", gang="g"))
    assert lone_gang(pod).key == gang_key_of(pod)
