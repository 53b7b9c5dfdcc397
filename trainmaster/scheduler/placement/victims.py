"""The victim search: the cheapest minimal set of whole gangs to evict so a gang fits.

The search works on a copy of the cluster state, never on the live one:

1. take candidates out in cost order (``victim_cost``) until the placer (the same
   placement the cycle uses, required topology included) puts the gang somewhere; none
   fit: no preemption;
2. put victims back, most expensive first, wherever the gang still fits without them,
   so the set is minimal (evicting any fewer would not do) and only the domain the gang
   lands in is touched;
3. the placement found with the final set is where the gang is nominated.

Step 1 makes the highest victim priority the least possible (a prefix of the priority
order is taken); step 2 is greedy on work lost and GPUs, not an exhaustive search over
all subsets.

Elastic gangs come as two parts (``elastic_parts``): the members above the minimum (a
shrink) are always taken before, and kept evicted with, the rest of their gang.
"""

from __future__ import annotations

from collections.abc import Callable, Collection, Sequence

from ..framework.interface import FilterPlugin, ScorePlugin
from ..framework.model import Gang
from ..framework.results import Placement
from ..plugins.preemption import Preemption, Victim, victim_cost
from ..state import ClusterState, PodState
from .domain_victims import applies, choose_domain, domain_nodes
from .place import Placer, place_gang


def _evict(sim: ClusterState, victim: Victim) -> None:
    for pod, _ in victim.pods:
        sim.remove(pod.uid)


def _restore(sim: ClusterState, victim: Victim) -> None:
    for pod, node in victim.pods:
        sim.add_bound(pod, node)


def _shrinks_first(ordered: list[Victim]) -> list[Victim]:
    """``ordered`` with each elastic gang's members above its minimum moved just before
    the rest of that gang if they came after it (a tie in cost)."""
    shrinks = {v.gang: v for v in ordered if v.shrink}
    out: list[Victim] = []
    taken: set[str] = set()
    for victim in ordered:
        if victim.shrink:
            if victim.gang not in taken:
                out.append(victim)
                taken.add(victim.gang)
            continue
        above = shrinks.get(victim.gang)
        if above is not None and victim.gang not in taken:
            out.append(above)
            taken.add(victim.gang)
        out.append(victim)
    return out


def select_victims(
    snapshot: ClusterState,
    gang: Gang,
    candidates: Sequence[Victim],
    *,
    filters: Sequence[FilterPlugin],
    scorer: ScorePlugin,
    blocked: Collection[str] = (),
    placer: Placer = place_gang,
    admits: Callable[[Sequence[Victim]], bool] | None = None,
    domain_search: bool = True,
) -> Preemption | None:
    """The cheapest minimal set of whole gangs whose eviction lets ``gang`` fit, with
    the placement it would get; None when evicting every candidate would not do, or
    when the gang fits without evicting anything. ``placer`` is the placement the cycle
    uses (the simulator passes its baseline policies); ``admits``: whether the gang's
    quota lets it in with those victims gone (fair sharing frees quota, not only nodes).
    A gang of identical pods required at a switch level gets the domain-freeing search
    (``domain_victims``: least lost work) unless ``domain_search`` is off (the greedy
    order alone, as before it: benchmarks and the simulator compare the two)."""
    ordered = _shrinks_first(sorted(candidates, key=victim_cost))
    if not ordered:
        return None
    if domain_search and placer is place_gang and applies(gang, snapshot):
        if isinstance(place_gang(snapshot, gang, filters=filters, scorer=scorer,
                                 blocked=blocked), Placement) and (
                admits is None or admits(())):
            return None  # it fits as things are: nothing to preempt
        found = _free_domain(snapshot, gang, ordered, filters=filters, scorer=scorer,
                             blocked=blocked, admits=admits)
        if found is not None:
            return found
    sim = snapshot.copy()

    def fits() -> Placement | None:
        if admits is not None and not admits(chosen):
            return None
        result = placer(sim, gang, filters=filters, scorer=scorer, blocked=blocked)
        return result if isinstance(result, Placement) else None

    chosen: list[Victim] = []
    if fits() is not None:
        return None  # it fits as things are: nothing to preempt
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
        if victim.shrink and any(v.gang == victim.gang and not v.shrink for v in chosen):
            continue  # the rest of its gang stays evicted: so do its members above minimum
        _restore(sim, victim)
        if fits() is None:
            _evict(sim, victim)
        else:
            chosen.remove(victim)
    placement = fits()
    if placement is None:  # cannot happen: the last state was checked to fit
        return None
    return Preemption(gang.key, tuple(sorted(chosen, key=victim_cost)), placement)


def _free_domain(
    snapshot: ClusterState,
    gang: Gang,
    candidates: Sequence[Victim],
    *,
    filters: Sequence[FilterPlugin],
    scorer: ScorePlugin,
    blocked: Collection[str],
    admits: Callable[[Sequence[Victim]], bool] | None,
) -> Preemption | None:
    """The domain-freeing choice (``domain_victims``), checked with the real placer on
    that domain's nodes alone; None when there is none or the placer disagrees (the
    caller then falls back to the greedy search)."""
    choice = choose_domain(snapshot, gang, candidates, filters=filters, blocked=blocked,
                           admits=admits)
    if choice is None:
        return None
    level = gang.topology.level
    inside = domain_nodes(snapshot, level, choice.domain)
    outside = {n.name for n in snapshot.nodes if n.name not in inside}
    # The victims out of the state for one placement call, then back exactly as they
    # were (bound, same nodes): a copy of a 1,000-node state costs more than the search.
    # A victim pod in any other state (not expected) gets the copy instead.
    bound = all(snapshot.pod_state(pod.uid) is PodState.BOUND
                for victim in choice.victims for pod, _ in victim.pods)
    state = snapshot if bound else snapshot.copy()
    for victim in choice.victims:
        _evict(state, victim)
    try:
        placement = place_gang(state, gang, filters=filters, scorer=scorer,
                               blocked=set(blocked) | outside)
    finally:
        if bound:
            for victim in choice.victims:
                _restore(snapshot, victim)
    if not isinstance(placement, Placement):
        return None
    return Preemption(gang.key, tuple(sorted(choice.victims, key=victim_cost)), placement,
                      exact=choice.exact)


def nominate_victims(
    snapshot: ClusterState,
    gang: Gang,
    candidates: Sequence[Victim],
    nominated: dict[str, frozenset[str]],
    *,
    filters: Sequence[FilterPlugin],
    scorer: ScorePlugin,
    placer: Placer = place_gang,
    admits: Callable[[Sequence[Victim]], bool] | None = None,
    domain_search: bool = True,
) -> Preemption | None:
    """``select_victims`` with the nodes nominated to other preemptors blocked (freed
    nodes are for their preemptor only); the nodes found are then nominated to ``gang``
    in ``nominated`` (the cycle's ``GangScheduler.nominated``)."""
    others: set[str] = set().union(*(n for k, n in nominated.items() if k != gang.key))
    found = select_victims(snapshot, gang, candidates, filters=filters, scorer=scorer,
                           blocked=others, placer=placer, admits=admits,
                           domain_search=domain_search)
    if found is not None:
        nominated[gang.key] = found.nodes
    return found
