"""Preemption policy (post-filter): who may evict whom, and at what cost.

A candidate is a running gang (every member bound, none terminating) that the pending
gang may evict: one of lower priority, or one of a queue that borrows from the pending
gang's cohort while the pending gang's queue is within its nominal quota (a lender
taking its quota back). Candidates are ordered by cost: borrowed gangs first, then the
lowest priority, then the least work lost (GPU-seconds since the victim's last
checkpoint), then the fewest GPUs, then by name (deterministic). The search for the
victim set is ``placement/victims.py`` (it needs the placement); the runtime's
``Preemptor`` and the simulator's price their candidates here.

An elastic gang running above its minimum is two candidates (``elastic_parts``): its
members above the minimum, whose eviction only shrinks it (priced at a rescale: every
GPU of the gang idle for ``rescale_seconds``, not the work since its checkpoint), and
the rest, whose eviction stops it (priced like a whole gang). The search never takes the
rest without the members above the minimum.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Iterable, Mapping
from dataclasses import dataclass

from ..framework.model import GPU, PodRequest
from ..framework.results import Placement


@dataclass(frozen=True, slots=True)
class Victim:
    """A running gang that could be evicted."""

    gang: str
    priority: int
    pods: tuple[tuple[PodRequest, str], ...]
    """Its bound members and their nodes."""
    work_lost: float = 0.0
    """GPU-seconds since its last checkpoint (since its start without one), plus its
    restart cost (every GPU idle while it comes back)."""
    borrowed: bool = False
    """Its queue uses GPUs lent by the preemptor's cohort (or fair sharing lets the
    preemptor take them back): evictable whatever its priority."""
    share: float = 0.0
    """Its side's fair share (fair sharing): the highest share is evicted first."""
    shrink: bool = False
    """Only an elastic gang's members above its minimum: the gang runs on without them."""

    @property
    def gpus(self) -> int:
        return sum(p.requests.get(GPU, 0) for p, _ in self.pods)

    @property
    def nodes(self) -> frozenset[str]:
        return frozenset(node for _, node in self.pods)


def work_lost(now: float, since: float, gpus: int) -> float:
    """GPU-seconds a victim loses if evicted at ``now``: the work since ``since`` (its
    last checkpoint, or its start without one)."""
    return max(0.0, now - since) * gpus


def evictable(victim: Victim, preemptor_priority: int) -> bool:
    """Whether a pending gang of ``preemptor_priority`` may evict ``victim``: it has
    lower priority, or its queue borrows from the preemptor's cohort (a lender taking its
    quota back evicts borrowers whatever their priority)."""
    return victim.borrowed or victim.priority < preemptor_priority


def priced(victim: Victim, preemptor_priority: int, now: float, since: float,
           restart_seconds: float = 0.0) -> Victim | None:
    """``victim`` with the work it would lose if evicted at ``now`` (``since``: the later
    of its start and its last checkpoint; ``restart_seconds``: how long it takes to come
    back, every GPU idle); None when ``preemptor_priority`` may not evict it. The runtime
    and the simulator build their candidates with this."""
    if not evictable(victim, preemptor_priority):
        return None
    lost = work_lost(now, since, victim.gpus) + max(0.0, restart_seconds) * victim.gpus
    return dataclasses.replace(victim, work_lost=lost)


DEFAULT_RESCALE_SECONDS = 30.0
"""What a shrink costs an elastic gang: its ranks re-rendezvous at the smaller size from
a checkpoint written on the way out (SIGTERM), about this long with every GPU idle."""


def rescale_cost(gpus: int, rescale_seconds: float = DEFAULT_RESCALE_SECONDS) -> float:
    """GPU-seconds an elastic gang of ``gpus`` GPUs loses to one rescale."""
    return max(0.0, rescale_seconds) * gpus


def elastic_parts(victim: Victim, minimum: int,
                  rescale_seconds: float = DEFAULT_RESCALE_SECONDS) -> tuple[Victim, ...]:
    """A priced elastic ``victim`` as its members above ``minimum`` (the highest ranks,
    by pod name; a shrink, priced ``rescale_cost`` of the whole gang) and the rest
    (stopping it: the whole gang's ``work_lost``). At or below its minimum: itself."""
    surplus = len(victim.pods) - max(1, minimum)
    if surplus <= 0:
        return (victim,)
    pods = sorted(victim.pods, key=lambda bound: bound[0].name)
    above = dataclasses.replace(victim, pods=tuple(pods[-surplus:]), shrink=True,
                                work_lost=rescale_cost(victim.gpus, rescale_seconds))
    rest = dataclasses.replace(victim, pods=tuple(pods[:-surplus]))
    return above, rest



def with_shrinks(victims: Iterable[Victim], minimum: Mapping[str, int],
                 rescale_seconds: float = DEFAULT_RESCALE_SECONDS) -> list[Victim]:
    """``victims`` with each elastic one (its gang in ``minimum``: gang -> its minimum
    members) split by ``elastic_parts``; the runtime's and the simulator's preemptors both
    offer shrinking as the cheap option this way."""
    return [part for victim in victims for part in (
        elastic_parts(victim, minimum[victim.gang], rescale_seconds)
        if victim.gang in minimum else (victim,))]

def victim_cost(victim: Victim) -> tuple[bool, float, int, float, int, str]:
    """Cheapest first: borrowed, highest fair share, lowest priority, least work lost,
    fewest GPUs, name."""
    return (not victim.borrowed, -victim.share, victim.priority, victim.work_lost,
            victim.gpus, victim.gang)


def set_cost(victims: Iterable[Victim]) -> tuple[int, float, int]:
    """A victim set's cost, in order: its highest priority, work lost, GPUs."""
    chosen = list(victims)
    return (
        max((v.priority for v in chosen), default=-1),
        sum(v.work_lost for v in chosen),
        sum(v.gpus for v in chosen),
    )


@dataclass(frozen=True, slots=True)
class Preemption:
    gang: str
    victims: tuple[Victim, ...]
    placement: Placement
    """Where the gang goes once the victims are gone."""
    exact: bool = True
    """False when the domain search ran out of steps (its best set found by then)."""

    @property
    def domain(self) -> str:
        """The domain the gang is placed in once the victims are gone."""
        return self.placement.domain

    @property
    def work_lost(self) -> float:
        """Total lost work of the victims (GPU-seconds)."""
        return sum(v.work_lost for v in self.victims)

    @property
    def nodes(self) -> frozenset[str]:
        return frozenset(b.node for b in self.placement.bindings)
