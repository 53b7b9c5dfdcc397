"""Queue order, backfill, anti-starvation reservations, coscheduling and the framework."""

from __future__ import annotations

import math
from typing import ClassVar

import pytest

from trainmaster.scheduler import (
    DEFAULT_PLUGINS,
    REGISTRY,
    ClusterState,
    Code,
    Gang,
    GangScheduler,
    Handle,
    PodRequest,
    Profile,
    Status,
)
from trainmaster.scheduler.framework.gangs import GangManager, GangState
from trainmaster.scheduler.plugins import default_profile
from trainmaster.scheduler.plugins.coscheduling import Coscheduling
from trainmaster.scheduler.plugins.resources_fit import NodeResourcesFit
from trainmaster.scheduler.plugins.taint_toleration import TaintToleration
from trainmaster.scheduler.runtime.queue import GangQueue
from trainmaster.scheduler.state.views import PodState

from .builders import LEVELS, make_cluster, make_gang, make_node, make_pod


class FakeClock:
    def __init__(self) -> None:
        self.now = 0.0

    def __call__(self) -> float:
        return self.now


@pytest.mark.parametrize(
    ("gangs", "expected"),
    [
        ([("a", 0, 0.0), ("b", 5, 9.0)], ["b", "a"]),
        ([("a", 1, 5.0), ("b", 1, 2.0)], ["b", "a"]),
        ([("b", 1, 2.0), ("a", 1, 2.0)], ["a", "b"]),
        ([("z", 0, 0.0), ("y", 10, 5.0), ("x", 10, 5.0), ("w", 10, 1.0)], ["w", "x", "y", "z"]),
    ],
    ids=["priority-first", "then-older", "then-name", "all-three"],
)
def test_queue_order(gangs: list[tuple[str, int, float]], expected: list[str]) -> None:
    queue = GangQueue()
    for name, priority, created in gangs:
        queue.add(make_gang(name, 1, priority=priority, created=created))
    assert [g.name for g in queue.ordered()] == expected
    assert [g.name for g in queue] == expected


def test_queue_order_follows_every_change() -> None:
    """The order is kept between changes: each add, replace and remove is seen, and a
    caller changing the list it got changes nothing else."""
    queue = GangQueue()
    queue.add(make_gang("a", 1, priority=0, created=1.0))
    queue.add(make_gang("b", 1, priority=0, created=2.0))
    first = queue.ordered()
    assert [g.name for g in first] == ["a", "b"]
    first.clear()
    assert [g.name for g in queue.ordered()] == ["a", "b"]
    queue.add(make_gang("c", 1, priority=5, created=3.0))
    assert [g.name for g in queue.ordered()] == ["c", "a", "b"]
    queue.add(make_gang("a", 1, priority=9, created=1.0))  # replaced: now first
    assert [g.name for g in queue.ordered()] == ["a", "c", "b"]
    queue.remove("default/c")
    assert [g.name for g in queue.ordered()] == ["a", "b"]
    assert queue.remove("default/missing") is None
    assert [g.name for g in queue.ordered()] == ["a", "b"]


def test_big_gang_does_not_block_smaller_ones() -> None:
    snap = make_cluster(1, 1, 2)  # 16 GPUs
    sched = GangScheduler(snap, clock=FakeClock())
    sched.submit(make_gang("big", 3, gpus=8, priority=10))
    sched.submit(make_gang("small", 2, gpus=4, created=1.0))
    result = sched.run_cycle()
    assert [p.gang for p in result.placed] == ["default/small"]
    assert [u.gang for u in result.unschedulable] == ["default/big"]
    assert "default/small" not in sched.queue
    assert all(snap.pod_state(b.pod.uid) is PodState.ASSUMED for b in result.placed[0].bindings)


def one_leaf() -> ClusterState:
    nodes = [make_node(f"n{i}", topology=("spine-0", "leaf-0")) for i in range(2)]
    return ClusterState(nodes, LEVELS)


@pytest.mark.parametrize(
    ("starvation_after", "big_placed"),
    [(60.0, True), (math.inf, False)],
    ids=["reservation-lets-big-gang-in", "pure-backfill-starves-it"],
)
def test_anti_starvation(starvation_after: float, big_placed: bool) -> None:
    snap = one_leaf()
    clock = FakeClock()
    sched = GangScheduler(snap, clock=clock, starvation_after=starvation_after)
    snap.add_bound(make_pod("old", gpus=8), "n0")
    big = make_gang("big", 2, gpus=8, level="leaf", mode="required")
    sched.submit(big)

    def small(i: int) -> PodRequest:
        gang = make_gang(f"s{i}", 1, gpus=8, created=float(i))
        sched.submit(gang)
        return gang.members[0]

    s1 = small(1)
    first = sched.run_cycle()  # t=0: big does not fit, s1 backfills n1
    assert [p.gang for p in first.placed] == ["default/s1"]
    snap.remove("default/old")

    clock.now = 10.0
    s2 = small(2)
    second = sched.run_cycle()  # not starving yet: s2 backfills n0
    assert [p.gang for p in second.placed] == ["default/s2"]
    assert second.reservations == ()
    snap.confirm(s1.uid)
    snap.remove(s1.uid)

    clock.now = 100.0
    small(3)
    third = sched.run_cycle()
    assert sched.waiting_since("default/big") == 0.0
    if big_placed:
        assert third.placed == ()  # s3 may not take n1: reserved for big
        (reservation,) = third.reservations
        assert (reservation.gang, reservation.level, reservation.domain) == (
            "default/big",
            "leaf",
            "spine-0/leaf-0",
        )
        assert reservation.nodes == {"n0", "n1"}
        s3_why = next(u for u in third.unschedulable if u.gang == "default/s3")
        assert "reserved for a starving gang" in s3_why.reason
    else:
        assert [p.gang for p in third.placed] == ["default/s3"]
    snap.remove(s2.uid)

    clock.now = 110.0
    fourth = sched.run_cycle()
    assert ("default/big" in {p.gang for p in fourth.placed}) is big_placed
    assert ("default/big" in sched.queue) is not big_placed


def test_reservation_does_not_block_higher_priority_and_is_sticky() -> None:
    snap = make_cluster(1, 2, 2)  # two leaves of 2 nodes x 8 GPUs
    clock = FakeClock()
    sched = GangScheduler(snap, clock=clock, starvation_after=5.0)
    for node in ("s0-l0-n0", "s0-l1-n0"):
        snap.add_bound(make_pod(f"hog-{node}", gpus=4), node)
    sched.submit(make_gang("big", 2, gpus=8, level="leaf", mode="required"))
    assert sched.run_cycle().reservations == ()
    clock.now = 10.0
    first = sched.run_cycle().reservations
    assert [r.domain for r in first] == ["spine-0/leaf-0"]  # tie on free GPUs: by name
    snap.remove("default/hog-s0-l1-n0")  # leaf-1 now fully free
    sched.submit(make_gang("vip", 1, gpus=4, priority=100))
    sched.submit(make_gang("low", 1, gpus=4, created=1.0))
    clock.now = 20.0
    cycle = sched.run_cycle()
    placed = {p.gang: p for p in cycle.placed}
    # vip runs before big: best fit puts it on the hog's node, inside the reservation.
    assert placed["default/vip"].bindings[0].node == "s0-l0-n0"
    # big now fits in the free leaf and is placed there.
    assert placed["default/big"].domain == "spine-0/leaf-1"
    assert "default/low" in placed
    assert cycle.reservations == ()


def test_sticky_reservation_survives_cycles() -> None:
    snap = make_cluster(1, 2, 2)
    clock = FakeClock()
    sched = GangScheduler(snap, clock=clock, starvation_after=1.0)
    for node in ("s0-l0-n0", "s0-l1-n0"):
        snap.add_bound(make_pod(f"hog-{node}", gpus=4), node)
    sched.submit(make_gang("big", 2, gpus=8, level="leaf", mode="required"))
    sched.run_cycle()
    clock.now = 2.0
    (first,) = sched.run_cycle().reservations
    snap.add_bound(make_pod("more", gpus=2), "s0-l0-n1")  # leaf-1 now has more free
    clock.now = 3.0
    (again,) = sched.run_cycle().reservations
    assert again == first


def test_unresolvable_gang_never_reserves() -> None:
    snap = make_cluster(1, 1, 2)
    clock = FakeClock()
    sched = GangScheduler(snap, clock=clock, starvation_after=0.0)
    sched.submit(make_gang("huge", 3, gpus=8, level="leaf", mode="required"))
    sched.submit(make_gang("small", 1, gpus=8, created=1.0))
    clock.now = 1000.0
    result = sched.run_cycle()
    assert result.reservations == ()
    assert [p.gang for p in result.placed] == ["default/small"]
    (huge,) = result.unschedulable
    assert huge.code is Code.UNSCHEDULABLE_AND_UNRESOLVABLE
    assert sched.waiting_since("default/huge") is None


def test_two_starving_gangs_reserve_disjoint_domains() -> None:
    snap = make_cluster(1, 2, 2)
    for node in ("s0-l0-n0", "s0-l1-n0"):
        snap.add_bound(make_pod(f"hog-{node}", gpus=4), node)
    sched = GangScheduler(snap, clock=FakeClock(), starvation_after=0.0)
    sched.submit(make_gang("a", 2, gpus=8, level="leaf", mode="required"))
    sched.submit(make_gang("b", 2, gpus=8, level="leaf", mode="required", created=1.0))
    reservations = sched.run_cycle().reservations
    assert [r.gang for r in reservations] == ["default/a", "default/b"]
    assert reservations[0].nodes.isdisjoint(reservations[1].nodes)


def test_remove_clears_state() -> None:
    snap = make_cluster(1, 1, 2)
    snap.add_bound(make_pod("hog", gpus=1), "s0-l0-n0")
    sched = GangScheduler(snap, clock=FakeClock(), starvation_after=0.0)
    sched.submit(make_gang("g", 2, gpus=8))
    sched.run_cycle()
    assert sched.waiting_since("default/g") == 0.0
    sched.remove("default/g")
    assert sched.waiting_since("default/g") is None
    assert len(sched.queue) == 0


# --- coscheduling ---------------------------------------------------------------------


@pytest.mark.parametrize(
    ("members", "min_member", "pod_gang", "placed", "pre", "permit"),
    [
        (2, 0, "g", 0, GangState.READY, GangState.WAIT),
        (2, 0, "g", 2, GangState.READY, GangState.READY),
        (2, 3, "g", 2, GangState.WAIT, GangState.WAIT),
        (3, 2, "g", 2, GangState.READY, GangState.READY),
        (2, 0, "other", 0, GangState.NOT_FOUND, GangState.NOT_FOUND),
    ],
    ids=["unplaced", "all-placed", "too-few-members", "min-member-placed", "unknown-gang"],
)
def test_gang_manager(
    members: int, min_member: int, pod_gang: str, placed: int, pre: GangState, permit: GangState
) -> None:
    snap = make_cluster()
    gang = make_gang("g", members, min_member=min_member)
    manager = GangManager(snap.placed_members)
    manager.add(gang)
    for pod in gang.members[:placed]:
        snap.assume(pod, "s0-l0-n0" if pod.name.endswith("0") else "s0-l0-n1")
    probe = make_pod("probe", gang=pod_gang)
    assert manager.pre_filter(probe) is pre
    assert manager.permit(probe) is permit


@pytest.mark.parametrize(
    ("state", "code"),
    [
        (GangState.READY, Code.SUCCESS),
        (GangState.WAIT, Code.WAIT),
        (GangState.NOT_FOUND, Code.UNSCHEDULABLE_AND_UNRESOLVABLE),
    ],
    ids=["ready", "wait", "not-found"],
)
def test_coscheduling_maps_states(state: GangState, code: Code) -> None:
    class Fixed(GangManager):
        def pre_filter(self, pod: PodRequest) -> GangState:
            return state

        def permit(self, pod: PodRequest) -> GangState:
            return state

    plugin = Coscheduling(Fixed(make_cluster().placed_members))
    pod = make_pod("p", gang="g")
    assert plugin.pre_filter(pod).code is code
    assert plugin.permit(pod, "n").code is code
    assert plugin.permit(make_pod("lone"), "n").code is Code.SKIP


def test_scheduler_waits_for_members_and_rejects_unknown_gang() -> None:
    sched = GangScheduler(make_cluster(), clock=FakeClock())
    sched.submit(make_gang("partial", 2, min_member=4))
    stray = Gang("stray", (make_pod("x", gang="elsewhere"),))
    sched.submit(stray)
    codes = {u.gang: u.code for u in sched.run_cycle().unschedulable}
    assert codes == {
        "default/partial": Code.WAIT,
        "default/stray": Code.UNSCHEDULABLE_AND_UNRESOLVABLE,
    }


def test_lone_pod_is_scheduled() -> None:
    sched = GangScheduler(make_cluster(), clock=FakeClock())
    sched.submit(Gang.of_pod(make_pod("solo", gpus=8)))
    (placement,) = sched.run_cycle().placed
    assert placement.level == "node"


# --- framework ------------------------------------------------------------------------


class DenyPermit:
    NAME: ClassVar[str] = "DenyPermit"

    def permit(self, pod: PodRequest, node: str) -> Status:
        return Status.of(Code.UNSCHEDULABLE, self.NAME, "denied")


class RecordingReserve:
    NAME: ClassVar[str] = "RecordingReserve"
    log: ClassVar[list[str]] = []

    def reserve(self, pod: PodRequest, node: str) -> Status:
        self.log.append(f"reserve {pod.name}")
        return Status.success(self.NAME)

    def unreserve(self, pod: PodRequest, node: str) -> None:
        self.log.append(f"unreserve {pod.name}")


def test_permit_rejection_undoes_whole_gang() -> None:
    registry = {
        **REGISTRY,
        DenyPermit.NAME: lambda h: DenyPermit(),
        RecordingReserve.NAME: lambda h: RecordingReserve(),
    }
    snap = make_cluster()
    RecordingReserve.log.clear()
    sched = GangScheduler(
        snap,
        clock=FakeClock(),
        plugins=(*DEFAULT_PLUGINS, RecordingReserve.NAME, DenyPermit.NAME),
        registry=registry,
    )
    sched.submit(make_gang("g", 3, gpus=4))
    result = sched.run_cycle()
    assert result.placed == ()
    assert result.unschedulable[0].reason == "denied"
    assert list(snap.pods()) == []
    assert RecordingReserve.log == [
        "reserve g-0",
        "reserve g-1",
        "reserve g-2",
        "unreserve g-2",
        "unreserve g-1",
        "unreserve g-0",
    ]
    assert "default/g" in sched.queue


def test_profile_build_default() -> None:
    snap = make_cluster()
    profile = default_profile(Handle(snap, GangManager(snap.placed_members)))
    assert [f.NAME for f in profile.filters] == [
        "NodeUnschedulable",
        "NodeSelector",
        "NodeAffinity",
        "TaintToleration",
    ]
    # Several weighted scorers: best fit, plus dataset locality for gangs that name some.
    assert [(p.NAME, w) for p, w in profile.scorer.scorers] == [
        ("BestFit", 1),
        ("DatasetLocality", 1),
    ]
    assert profile.scorer.domain_choice is not None
    assert profile.scorer.domain_choice.NAME == "TightestDomain"
    assert [p.NAME for p in profile.permits] == ["Coscheduling"]
    assert [p.NAME for p in profile.pre_filters] == ["Coscheduling"]
    assert set(REGISTRY) >= set(DEFAULT_PLUGINS)


@pytest.mark.parametrize(
    ("names", "message"),
    [
        (("Nope",), "unknown plugin"),
        (("Dynamic",), "not STATIC"),
        (("BestFit", "BestFit"), "named twice"),
    ],
    ids=["unknown", "dynamic-filter", "same-plugin-twice"],
)
def test_profile_build_errors(names: tuple[str, ...], message: str) -> None:
    class Dynamic(TaintToleration):
        NAME: ClassVar[str] = "Dynamic"
        STATIC: ClassVar[bool] = False

    registry = {**REGISTRY, "Dynamic": lambda h: Dynamic()}
    snap = make_cluster()
    with pytest.raises(ValueError, match=message):
        Profile.build(Handle(snap, GangManager(snap.placed_members)), names, registry)


def test_resources_fit_is_accepted_as_builtin() -> None:
    snap = make_cluster()
    handle = Handle(snap, GangManager(snap.placed_members))
    profile = Profile.build(handle, (NodeResourcesFit.NAME,), REGISTRY)
    assert profile.filters == ()
