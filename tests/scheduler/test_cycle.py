"""``Cycle``: the one scheduling cycle the runtime and the simulator host, with its ports."""

from __future__ import annotations

from typing import ClassVar

import pytest

from trainmaster.scheduler import (
    ClusterState,
    Code,
    Cycle,
    Gang,
    GangScheduler,
    NodeInfo,
    Placement,
    PodRequest,
    Status,
)
from trainmaster.scheduler.framework.model import GPU

from .builders import make_gang


def _one_node() -> tuple[ClusterState, PodRequest]:
    """One 8-GPU node, full with a running pod (the would-be victim)."""
    state = ClusterState([NodeInfo("n0", {GPU: 8, "pods": 110})])
    victim = PodRequest("victim", requests={GPU: 8})
    state.add_bound(victim, "n0")
    return state, victim


class Binds:
    def __init__(self) -> None:
        self.placed: list[str] = []

    def bind(self, placement: Placement) -> None:
        self.placed.append(placement.gang)


class Evicts:
    """A post-filter that frees the node by removing the victim (an instant eviction)."""

    NAME: ClassVar[str] = "Evicts"

    def __init__(self, state: ClusterState, victim: PodRequest) -> None:
        self.state, self.victim = state, victim
        self.asked: list[str] = []

    def post_filter(self, gang: Gang) -> Status:
        self.asked.append(gang.key)
        if self.state.pod_state(self.victim.uid) is None:
            return Status(Code.UNSCHEDULABLE, ("nothing to evict",), self.NAME)
        self.state.remove(self.victim.uid)
        return Status(Code.SUCCESS, ("evicted victim",), self.NAME)


@pytest.mark.parametrize(("instant", "placed"), [(True, ["default/g"]), (False, [])],
                         ids=["simulator-instant", "runtime-graceful"])
def test_a_gang_that_frees_capacity_is_placed_at_once_only_with_instant_evictions(
        instant: bool, placed: list[str]) -> None:
    state, victim = _one_node()
    sched = GangScheduler(state)
    sched.submit(make_gang("g", 1, gpus=8, cpu=0, memory=0))
    binds, evicts = Binds(), Evicts(state, victim)
    passes: list[int] = []
    cycle = Cycle(sched, binds, evicts, instant_evictions=instant,
                  on_pass=lambda: passes.append(1))
    outcome = cycle.run()
    assert binds.placed == placed == [p.gang for p in outcome.placed]
    assert evicts.asked == ["default/g"]  # once per run, whatever happens after
    assert outcome.post_filtered["default/g"].message == "evicted victim"
    assert outcome.freed_for == {"default/g"}
    assert len(passes) == (2 if instant else 1)
    assert outcome.core_seconds > 0


def test_quota_holds_and_quiet_gangs_are_not_offered_to_the_post_filter() -> None:
    state, victim = _one_node()

    class Refuse:
        def refusal(self, gang: Gang) -> str | None:
            return "queue q: 8/8 GPUs in use" if gang.name == "held" else None

        def admitted(self, gang: Gang, placement: Placement) -> None:
            pass

    sched = GangScheduler(state, admission=Refuse())
    for name in ("held", "quiet", "asks"):
        sched.submit(make_gang(name, 1, gpus=8, cpu=0, memory=0))
    evicts = Evicts(state, victim)
    outcome = Cycle(sched, Binds(), evicts).run(quiet={"default/quiet"})
    codes = {f.gang: f.code for f in outcome.result().unschedulable}
    assert codes["default/held"] is Code.UNSCHEDULABLE_AND_UNRESOLVABLE
    assert evicts.asked == ["default/asks"]


def test_without_a_post_filter_a_failure_ends_the_cycle() -> None:
    state, _ = _one_node()
    sched = GangScheduler(state)
    sched.submit(make_gang("g", 1, gpus=8, cpu=0, memory=0))
    outcome = Cycle(sched, Binds()).run()
    assert not outcome.placed and not outcome.post_filtered
    assert [f.gang for f in outcome.result().unschedulable] == ["default/g"]
