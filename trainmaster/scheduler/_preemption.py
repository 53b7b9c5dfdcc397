"""Gang preemption: which running gangs to evict, whole, so that a pending gang fits.

A candidate is a running gang (every member bound, none terminating) that the pending
gang may evict: one of lower priority, or one of a queue that borrows from the pending
gang's cohort while the pending gang's queue is within its nominal quota (a lender
taking its quota back). Candidates are ordered by cost: borrowed gangs first, then the
lowest priority, then the least work lost (GPU-seconds since the victim's last
checkpoint), then the fewest GPUs, then by name (deterministic).

The search works on a copy of the snapshot, never on the live one:

1. take candidates out in cost order until ``place_gang`` (the same placement the cycle
   uses, required topology included) puts the gang somewhere; none fit: no preemption;
2. put victims back, most expensive first, wherever the gang still fits without them,
   so the set is minimal (evicting any fewer would not do) and only the domain the gang
   lands in is touched;
3. the placement found with the final set is where the gang is nominated.

Step 1 makes the highest victim priority the least possible (a prefix of the priority
order is taken); step 2 is greedy on work lost and GPUs, not an exhaustive search over
all subsets.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Collection, Iterable, Sequence
from dataclasses import dataclass

from ._contracts import FilterPlugin, ScorePlugin
from ._model import GPU, Gang, PodRequest
from ._placement import Placement, Placer, place_gang
from ._snapshot import ClusterSnapshot


@dataclass(frozen=True, slots=True)
class Victim:
    """A running gang that could be evicted."""

    gang: str
    priority: int
    pods: tuple[tuple[PodRequest, str], ...]
    """Its bound members and their nodes."""
    work_lost: float = 0.0
    """GPU-seconds since its last checkpoint (since its start without one)."""
    borrowed: bool = False
    """Its queue uses GPUs lent by the preemptor's cohort."""

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


def priced(victim: Victim, preemptor_priority: int, now: float, since: float) -> Victim | None:
    """``victim`` with the work it would lose if evicted at ``now`` (``since``: the later
    of its start and its last checkpoint); None when ``preemptor_priority`` may not evict
    it. The runtime and the simulator build their candidates with this."""
    if not evictable(victim, preemptor_priority):
        return None
    return dataclasses.replace(victim, work_lost=work_lost(now, since, victim.gpus))


def victim_cost(victim: Victim) -> tuple[bool, int, float, int, str]:
    """Cheapest first: borrowed, lowest priority, least work lost, fewest GPUs, name."""
    return (not victim.borrowed, victim.priority, victim.work_lost, victim.gpus, victim.gang)


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

    @property
    def nodes(self) -> frozenset[str]:
        return frozenset(b.node for b in self.placement.bindings)


def _evict(sim: ClusterSnapshot, victim: Victim) -> None:
    for pod, _ in victim.pods:
        sim.remove(pod.uid)


def _restore(sim: ClusterSnapshot, victim: Victim) -> None:
    for pod, node in victim.pods:
        sim.add_bound(pod, node)


def select_victims(
    snapshot: ClusterSnapshot,
    gang: Gang,
    candidates: Sequence[Victim],
    *,
    filters: Sequence[FilterPlugin],
    scorer: ScorePlugin,
    blocked: Collection[str] = (),
    placer: Placer = place_gang,
) -> Preemption | None:
    """The cheapest minimal set of whole gangs whose eviction lets ``gang`` fit, with
    the placement it would get; None when evicting every candidate would not do, or
    when the gang fits without evicting anything. ``placer`` is the placement the cycle
    uses (the simulator passes its baseline policies)."""
    ordered = sorted(candidates, key=victim_cost)
    if not ordered:
        return None
    sim = snapshot.copy()

    def fits() -> Placement | None:
        result = placer(sim, gang, filters=filters, scorer=scorer, blocked=blocked)
        return result if isinstance(result, Placement) else None

    if fits() is not None:
        return None  # it fits as things are: nothing to preempt
    chosen: list[Victim] = []
    placement: Placement | None = None
    for victim in ordered:
        _evict(sim, victim)
        chosen.append(victim)
        placement = fits()
        if placement is not None:
            break
    if placement is None:
        return None
    for victim in sorted(chosen, key=victim_cost, reverse=True):
        _restore(sim, victim)
        if fits() is None:
            _evict(sim, victim)
        else:
            chosen.remove(victim)
    placement = fits()
    if placement is None:  # cannot happen: the last state was checked to fit
        return None
    return Preemption(gang.key, tuple(sorted(chosen, key=victim_cost)), placement)


def nominate_victims(
    snapshot: ClusterSnapshot,
    gang: Gang,
    candidates: Sequence[Victim],
    nominated: dict[str, frozenset[str]],
    *,
    filters: Sequence[FilterPlugin],
    scorer: ScorePlugin,
    placer: Placer = place_gang,
) -> Preemption | None:
    """``select_victims`` with the nodes nominated to other preemptors blocked (freed
    nodes are for their preemptor only); the nodes found are then nominated to ``gang``
    in ``nominated`` (the cycle's ``GangScheduler.nominated``)."""
    others: set[str] = set().union(*(n for k, n in nominated.items() if k != gang.key))
    found = select_victims(snapshot, gang, candidates, filters=filters, scorer=scorer,
                           blocked=others, placer=placer)
    if found is not None:
        nominated[gang.key] = found.nodes
    return found
