"""Preemption candidates with the queues' rules applied: reclaim and fair sharing.

The runtime's and the simulator's preemptors list the running gangs they could evict;
this prices them (``priced``) after marking the ones the queue ledger lets the
preemptor take whatever their priority: gangs of queues borrowing what its queue lent
(``QueueLedger.reclaimable_from``) and, with fair sharing, gangs of borrowers above the
preemptor's share by Kueue's strategies (``QueueLedger.fair_victims``, asked in cost
order so each target queue yields its cheapest gangs first). ``quota_admits`` is the
victim search's check that the evictions free the preemptor's quota, not only nodes.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass

from ..plugins.preemption import Victim, priced, victim_cost, work_lost
from ..plugins.quota import QueueLedger


@dataclass(frozen=True, slots=True)
class Candidate:
    """A running gang as a preemptor sees it, before pricing."""

    victim: Victim
    queue: str
    since: float
    """The later of its start and its last checkpoint."""
    restart_seconds: float = 0.0
    """How long it takes to come back after an eviction (priced, every GPU idle)."""


def gang_requests(victim: Victim) -> dict[str, int]:
    out: dict[str, int] = {}
    for pod, _ in victim.pods:
        for resource, qty in pod.requests.items():
            out[resource] = out.get(resource, 0) + qty
    return out


def priced_candidates(ledger: QueueLedger, queue: str, need: Mapping[str, int],
                      priority: int, now: float,
                      running: Sequence[Candidate]) -> list[Victim]:
    """The victims a gang of ``priority`` needing ``need`` in ``queue`` may evict,
    priced at ``now``."""
    reclaim = ledger.reclaimable_from(queue, need)
    marked = [dataclasses.replace(c.victim, borrowed=c.queue in reclaim) for c in running]
    fair: dict[str, float] = {}
    if ledger.fair.enable:
        order = sorted(zip(marked, running, strict=True), key=lambda vc: victim_cost(
            dataclasses.replace(vc[0], work_lost=work_lost(now, vc[1].since, vc[0].gpus))))
        fair = ledger.fair_victims(queue, need, [(v.gang, c.queue, gang_requests(v))
                                                 for v, c in order])
    out = []
    for victim, candidate in zip(marked, running, strict=True):
        if victim.gang in fair:
            victim = dataclasses.replace(victim, borrowed=True, share=fair[victim.gang])
        found = priced(victim, priority, now, candidate.since, candidate.restart_seconds)
        if found is not None:
            out.append(found)
    return out


def quota_admits(ledger: QueueLedger, queue: str,
                 need: Mapping[str, int]) -> Callable[[Sequence[Victim]], bool] | None:
    """For a gang its quota holds only for want of idle quota in the tree: whether it is
    admitted with the victims gone; None when quota does not hold it."""
    if ledger.quota_refusal(queue, need) is None:
        return None

    def admits(victims: Sequence[Victim]) -> bool:
        return ledger.fits_without(queue, need, [p.uid for v in victims for p, _ in v.pods])

    return admits


def may_preempt_for_quota(ledger: QueueLedger, queue: str, need: Mapping[str, int]) -> bool:
    """A gang its quota holds may still preempt when fair sharing could free quota."""
    return ledger.fair.enable and ledger.short_in_tree(queue, need)
