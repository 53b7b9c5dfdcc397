"""Queue admission and preemption in virtual time, with the scheduler's own rules.

Nothing here decides anything the scheduler's core does not: the quota and borrowing
answers are ``QueueLedger.refusal`` (``trainmaster/scheduler/_quota.py``), the lender's
claim on borrowers is ``QueueLedger.reclaimable_from``, who may evict whom and at what
cost is ``priced`` and the victim set and its nomination are ``nominate_victims``
(``_preemption.py``), with the policy's own placer plugged in. This module only feeds
them the simulation's state, as ``trainmaster/scheduler/_preempt.py`` feeds them the
runtime's cache:

* ``LedgerAdmission`` is the core's ``Admission`` hook over a ``QueueLedger``, charged
  per pod when the cycle places a gang and released when the job stops;
* ``Preemptor.choose`` is ``Preemptor.try_preempt`` without the API: a gang the cycle
  could not place (not one its quota holds) preempts when the scheduler's and its queue's
  ``preemption`` are on and some running gang is evictable; the freed nodes are
  nominated for it. Evictions are instantaneous (no grace period).
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass

from trainmaster.scheduler import (
    DEFAULT_RESCALE_SECONDS,
    Candidate,
    Gang,
    GangScheduler,
    Placement,
    Placer,
    PodRequest,
    Preemption,
    QueueLedger,
    Victim,
    gang_amounts,
    gang_gpus,
    may_preempt_for_quota,
    nominate_victims,
    priced_candidates,
    quota_admits,
    with_shrinks,
)

from ._queues import QueueConfig


class LedgerAdmission:
    """The core's ``Admission`` over a ledger; ``queue_of`` maps a gang key to its queue."""

    def __init__(self, ledger: QueueLedger, queue_of: Callable[[str], str]) -> None:
        self.ledger = ledger
        self.queue_of = queue_of

    def refusal(self, gang: Gang) -> str | None:
        return self.ledger.refusal(self.queue_of(gang.key), gang_amounts(gang))

    def retry_scope(self, gang: Gang) -> str | None:
        return self.ledger.retry_scope(self.queue_of(gang.key))

    def releases(self, scope: str) -> int:
        return self.ledger.releases(scope)

    def cycle_start(self, gangs: Sequence[Gang]) -> None:
        if self.ledger.fair.enable:
            self.ledger.set_waiting((self.queue_of(g.key), gang_amounts(g)) for g in gangs)

    def preemptible(self, gang: Gang) -> bool:
        return may_preempt_for_quota(self.ledger, self.queue_of(gang.key), gang_amounts(gang))

    def admitted(self, gang: Gang, placement: Placement) -> None:
        queue = self.queue_of(gang.key)
        self.ledger.admitted_waiting(queue, gang_amounts(gang))
        for binding in placement.bindings:
            self.ledger.charge(binding.pod.uid, queue, binding.pod.requests)


@dataclass(frozen=True, slots=True)
class RunningGang:
    """What preemption needs to know of a running job."""

    key: str
    priority: int
    queue: str
    bindings: tuple[tuple[PodRequest, str], ...]
    started: float
    checkpoint: float
    """Its last checkpoint (its start without one)."""
    min_pods: int = 0
    """An elastic job's minimum (its members above it go for a rescale); 0: rigid."""


class Preemptor:
    def __init__(self, config: QueueConfig, ledger: QueueLedger, placer: Placer) -> None:
        self.config = config
        self.ledger = ledger
        self.placer = placer
        self.rescale_seconds = DEFAULT_RESCALE_SECONDS
        """What a shrink costs an elastic victim (the simulation's ``ElasticModel``)."""
        self.domain_search = True
        """False: the greedy victim order used before domain-freeing preemption (the
        simulator's ``--preemption greedy``, for comparison)."""

    def may_preempt(self, queue: str) -> bool:
        """The scheduler's switch and the queue's (the spec renders ``Never`` as the
        PriorityClass' preemptionPolicy when either is off)."""
        spec = self.ledger.queues.get(queue)
        return self.config.preemption and (spec is None or spec.preemption)

    def choose(
        self,
        sched: GangScheduler,
        gang: Gang,
        queue: str,
        running: Callable[[], Iterable[RunningGang]],
        lowest: int | None,
        now: float,
        free_gpus: int,
    ) -> Preemption | None:
        """Victims for ``gang`` (and the nodes it is nominated to), or None. ``lowest``:
        the lowest priority running; ``free_gpus``: free GPUs on schedulable nodes (a
        cheap necessary condition before the victim search copies the snapshot)."""
        if not self.may_preempt(queue):
            return None
        need = gang_amounts(gang)
        if not self.ledger.reclaimable_from(queue, need) and not self.ledger.fair.enable \
                and (lowest is None or lowest >= gang.priority):
            return None  # nobody below it: no scan (as the runtime)
        runs = [run for run in running() if run.key != gang.key]
        candidates = priced_candidates(
            self.ledger, queue, need, gang.priority, now,
            [Candidate(Victim(run.key, run.priority, run.bindings), run.queue,
                       max(run.started, run.checkpoint)) for run in runs])
        min_pods = {run.key: run.min_pods for run in runs if run.min_pods}
        # Shrinking an elastic gang is the cheap option, as in the runtime.
        candidates = sched.guard.allowed(
            with_shrinks(candidates, min_pods, self.rescale_seconds), gang.priority, now)
        admits = quota_admits(self.ledger, queue, need)
        if free_gpus + sum(v.gpus for v in candidates) < gang_gpus(gang):
            return None  # even evicting all of them would not free enough GPUs
        found = nominate_victims(sched.snapshot, gang, candidates, sched.nominated,
                                 filters=sched.profile.filters, scorer=sched.profile.scorer,
                                 placer=self.placer, admits=admits,
                                 domain_search=self.domain_search)
        if found is not None:
            sched.preempted(gang)
        return found
