"""One scheduling cycle and what follows it, the same for the runtime and the simulator.

``Cycle.run``: the core's cycle (``GangScheduler.run_cycle``: queue order, admission,
pre-filter, placement, reserve/permit, anti-starvation), then every placed gang goes to
the bind port, then every gang that failed for capacity (``Code.UNSCHEDULABLE``, not a
quota hold) is offered, in queue order, to the post-filter (preemption). Where
evictions take effect at once (the simulator's evict port), the cycle runs again at the
same instant for the preemptors, each preempting at most once per ``run``; where they
take time (the runtime's victims terminate), the preemptor waits for the next cycle.
"""

from __future__ import annotations

import time
from collections.abc import Callable, Collection
from dataclasses import dataclass, field

from ..framework.interface import PostFilterPlugin
from ..framework.results import Placement, Unschedulable
from ..framework.status import Code, Status
from .gang_scheduler import CycleResult, GangScheduler
from .ports import BindPort


@dataclass(slots=True)
class CycleOutcome:
    placed: list[Placement] = field(default_factory=list)
    """Every gang placed (and handed to the bind port), over all passes."""
    last: CycleResult | None = None
    """The last pass of the core's cycle (its failures and reservations)."""
    post_filtered: dict[str, Status] = field(default_factory=dict)
    """Gang key -> the post-filter's last answer, for every gang it was asked about."""
    core_seconds: float = 0.0
    """Time spent in the core's cycle itself (no bind or post-filter work)."""
    freed_for: set[str] = field(default_factory=set)
    """Gangs the post-filter freed capacity for (each at most once per ``run``)."""

    def result(self) -> CycleResult:
        assert self.last is not None
        return CycleResult(tuple(self.placed), self.last.unschedulable, self.last.reservations)


class Cycle:
    def __init__(
        self,
        scheduler: GangScheduler,
        bind: BindPort,
        post_filter: PostFilterPlugin | None = None,
        *,
        instant_evictions: bool = False,
        on_pass: Callable[[], None] | None = None,
    ) -> None:
        self.scheduler = scheduler
        self.bind = bind
        self.post_filter = post_filter
        self.instant_evictions = instant_evictions
        """Evictions free capacity at once (virtual time): run again at the same instant."""
        self.on_pass = on_pass
        """Called before each pass of the core's cycle."""
        scheduler.preemption_wakes = post_filter is not None

    def run(self, quiet: Collection[str] = ()) -> CycleOutcome:
        """``quiet``: gangs whose failure the caller handles itself (no post-filter)."""
        outcome = CycleOutcome()
        while True:
            if self.on_pass is not None:
                self.on_pass()
            started = time.perf_counter()
            result = self.scheduler.run_cycle()
            outcome.core_seconds += time.perf_counter() - started
            outcome.last = result
            for placement in result.placed:
                outcome.placed.append(placement)
                self.bind.bind(placement)
            if self.post_filter is None:
                return outcome
            freed = False
            for failure in result.unschedulable:
                if not self._eligible(failure, quiet, outcome):
                    continue
                gang = self.scheduler.gangs.get(failure.gang)
                if gang is None or gang.grows:  # scale-out never evicts anybody
                    continue
                status = self.post_filter.post_filter(gang)
                outcome.post_filtered[failure.gang] = status
                if status.is_success():
                    outcome.freed_for.add(failure.gang)
                    freed = True
            if not (freed and self.instant_evictions):
                return outcome

    @staticmethod
    def _eligible(failure: Unschedulable, quiet: Collection[str], outcome: CycleOutcome) -> bool:
        return (failure.code is Code.UNSCHEDULABLE and failure.gang not in quiet
                and failure.gang not in outcome.freed_for)
