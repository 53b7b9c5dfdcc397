"""Domain-freeing preemption: which switch domain to free for a required-topology gang,
and which victims inside it, at the least total lost work.

Used by ``select_victims`` for a gang of identical pods whose topology is ``required``
at a switch level (leaf, spine, ...). The queue rules have already decided who *may* be
a victim (``priced_candidates``); this decides which and where:

1. For every domain of the gang's level, the candidates with a member on a node of that
   domain the gang may use are the domain's *items* (an elastic gang above its minimum
   is one item with two options: shrink, or shrink and stop). Victims elsewhere are
   never looked at for that domain.
2. A fit test needs no placement call: the gang's pods are alike, so it fits a domain
   when the pods that fit on each eligible node (``fit_count`` of the node's free
   resources plus what the chosen items free there) add up to its size.
3. A greedy pass (items by lost work per freed pod slot) gives every domain an upper
   bound; domains are then searched exactly, cheapest bound first, by depth-first
   branch and bound over the items (include/exclude, cheapest first), pruned when the
   cost reaches the best found anywhere or when even every remaining item would not
   make the gang fit. A step budget bounds the work; past it, the best found so far
   (at worst the greedy one) is used and the answer is marked inexact.
4. The chosen set is made minimal (any victim whose return still leaves a fit goes
   back, most expensive first) and checked with the real placer on the domain's nodes
   only; the placement found is where the gang is nominated.

Cost is total lost work (``Victim.work_lost``: GPU-seconds since the last complete
checkpoint plus the restart cost, or a shrink's rescale), then fewest GPUs evicted, then
the lowest highest victim priority, then the domain name (deterministic).
"""

from __future__ import annotations

import contextlib
from collections.abc import Callable, Collection, Mapping, Sequence
from dataclasses import dataclass

from ..framework.interface import FilterPlugin
from ..framework.model import Gang, TopologyMode
from ..framework.resources import fit_count
from ..plugins.preemption import Victim
from ..state import ClusterState

SEARCH_BUDGET = 5_000
"""Branch-and-bound steps per decision (all domains together): at most some tens of
milliseconds of Python; `trainmaster bench preemption` reports how often it ran out."""


@dataclass(frozen=True, slots=True)
class _Item:
    """A candidate gang as seen from one domain: its options, cumulative (an elastic
    gang's shrink, then shrink and stop)."""

    options: tuple[tuple[Victim, ...], ...]
    frees: tuple[Mapping[int, Mapping[str, int]], ...]
    """Per option: node index (in the domain, eligible) -> resources it frees there."""
    costs: tuple[float, ...]


@dataclass(frozen=True, slots=True)
class DomainChoice:
    domain: str
    victims: tuple[Victim, ...]
    lost: float
    exact: bool
    """False when the step budget ran out (the best set found by then)."""


def _cost(victims: Sequence[Victim]) -> float:
    return sum(v.work_lost for v in victims)


def applies(gang: Gang, snapshot: ClusterState) -> bool:
    """A complete gang of identical pods, ``required`` at a switch level."""
    topo = gang.topology
    if topo.mode is not TopologyMode.REQUIRED or not gang.members:
        return False
    try:
        rank = snapshot.rank(topo.level)
    except ValueError:
        return False
    if rank == 0 or rank >= len(snapshot.level_names) - 1:
        return False  # one node, or the whole cluster: no domain to choose
    first = gang.members[0]
    return all(p.effective_requests == first.effective_requests for p in gang.members)


def _items(snapshot: ClusterState, nodes: Collection[int],
           candidates: Sequence[Victim]) -> list[_Item]:
    """``candidates`` (those with a member in this domain) as items, elastic parts of one
    gang together."""
    index = snapshot.node_index_map
    by_gang: dict[str, list[Victim]] = {}
    for victim in candidates:
        by_gang.setdefault(victim.gang, []).append(victim)
    out = []
    for parts in by_gang.values():
        parts.sort(key=lambda v: not v.shrink)  # the shrink first: stop includes it
        options: list[tuple[Victim, ...]] = []
        frees: list[dict[int, dict[str, int]]] = []
        freed: dict[int, dict[str, int]] = {}
        for k, part in enumerate(parts):
            for pod, node in part.pods:
                i = index.get(node)
                if i is None or i not in nodes:
                    continue
                slot = freed.setdefault(i, {})
                for r, q in pod.effective_requests.items():
                    slot[r] = slot.get(r, 0) + q
            options.append(tuple(parts[: k + 1]))
            frees.append({i: dict(res) for i, res in freed.items()})
        if not freed:
            continue  # nothing of it where the gang could go
        out.append(_Item(tuple(options), tuple(frees), tuple(_cost(o) for o in options)))
    return out


class _Domain:
    """The fit arithmetic of one domain: free resources per eligible node."""

    def __init__(self, snapshot: ClusterState, name: str, nodes: Sequence[int],
                 request: Sequence[tuple[str, int]], need: int,
                 candidates: Sequence[Victim]) -> None:
        free = snapshot.columns.free
        self.name = name
        self.nodes = tuple(nodes)
        self.request = request
        self.need = need
        self.free = {i: dict(free[i]) for i in nodes}
        self.items = _items(snapshot, set(nodes), candidates)
        # Pods that fit per node now: a count re-asks only the nodes victims free.
        self.fit = {i: fit_count(request, self.free[i]) for i in nodes}
        self.base = sum(self.fit.values())

    def count(self, chosen: Mapping[int, int]) -> int:
        """Pods of the gang that fit with option ``chosen[item]`` of each chosen item."""
        extra: dict[int, dict[str, int]] = {}
        for k, opt in chosen.items():
            for i, res in self.items[k].frees[opt].items():
                slot = extra.get(i)
                if slot is None:
                    extra[i] = dict(res)
                    continue
                for r, q in res.items():
                    slot[r] = slot.get(r, 0) + q
        total = self.base
        for i, add in extra.items():
            free = dict(self.free[i])
            for r, q in add.items():
                free[r] = free.get(r, 0) + q
            total += fit_count(self.request, free) - self.fit[i]
        return total

    def victims(self, chosen: Mapping[int, int]) -> tuple[Victim, ...]:
        return tuple(v for k, opt in chosen.items() for v in self.items[k].options[opt])

    def cost(self, chosen: Mapping[int, int]) -> float:
        return sum(self.items[k].costs[opt] for k, opt in chosen.items())

    def greedy(self) -> dict[int, int] | None:
        """Items stopped whole, by lost work per pod slot they add, until it fits; then
        made minimal. None when even every item would not do."""
        chosen: dict[int, int] = {}
        full = {k: len(it.options) - 1 for k, it in enumerate(self.items)}
        if self.count(full) < self.need:
            return None
        base = self.count({})

        def ratio(k: int) -> float:
            gain = self.count({k: full[k]}) - base
            return self.items[k].costs[full[k]] / gain if gain > 0 else float("inf")

        for k in sorted(full, key=lambda k: (ratio(k), self.items[k].costs[full[k]])):
            chosen[k] = full[k]
            if self.count(chosen) >= self.need:
                break
        return self.minimal(chosen)

    def minimal(self, chosen: dict[int, int], admits: Callable[[Sequence[Victim]], bool]
                | None = None) -> dict[int, int]:
        """Give back every item (or step an elastic one down to its shrink) whose return
        still leaves a fit, most expensive first."""
        out = dict(chosen)
        for k in sorted(out, key=lambda k: -self.items[k].costs[out[k]]):
            while k in out:
                trial = dict(out)
                if trial[k] == 0:
                    del trial[k]
                else:
                    trial[k] -= 1
                if self.count(trial) < self.need or (
                        admits is not None and not admits(self.victims(trial))):
                    break
                out = trial
        return out


class _Search:
    """Branch and bound over every domain's items, one shared best and step budget."""

    def __init__(self, budget: int, admits: Callable[[Sequence[Victim]], bool] | None):
        self.budget = budget
        self.steps = 0
        self.exact = True
        self.admits = admits
        self.best: tuple[float, int, _Domain, dict[int, int]] | None = None

    def offer(self, dom: _Domain, chosen: dict[int, int]) -> None:
        victims = dom.victims(chosen)
        if self.admits is not None and not self.admits(victims):
            return
        key = (dom.cost(chosen), sum(v.gpus for v in victims))
        if self.best is None or key < self.best[:2]:
            self.best = (key[0], key[1], dom, dict(chosen))

    def run(self, dom: _Domain) -> None:
        order = sorted(range(len(dom.items)), key=lambda k: dom.items[k].costs[0])
        # Everything still to decide stopped: if that does not fit, no branch below does.
        tail: list[dict[int, int]] = [{} for _ in range(len(order) + 1)]
        for pos in range(len(order) - 1, -1, -1):
            k = order[pos]
            tail[pos] = {**tail[pos + 1], k: len(dom.items[k].options) - 1}
        chosen: dict[int, int] = {}

        def visit(pos: int, cost: float) -> None:
            if self.best is not None and cost >= self.best[0]:
                return
            if dom.count(chosen) >= dom.need:
                self.offer(dom, chosen)
                if self.admits is None:
                    return  # more victims only cost more
            if pos == len(order):
                return
            self.steps += 1
            if self.steps > self.budget:
                self.exact = False
                raise TimeoutError
            if dom.count({**chosen, **tail[pos]}) < dom.need:
                return
            k = order[pos]
            for opt, extra in enumerate(dom.items[k].costs):
                chosen[k] = opt
                visit(pos + 1, cost + extra)
            del chosen[k]
            visit(pos + 1, cost)

        with contextlib.suppress(TimeoutError):  # the budget ran out: keep the best so far
            visit(0, 0.0)


def choose_domain(
    snapshot: ClusterState,
    gang: Gang,
    candidates: Sequence[Victim],
    *,
    filters: Sequence[FilterPlugin],
    blocked: Collection[str] = (),
    admits: Callable[[Sequence[Victim]], bool] | None = None,
    budget: int = SEARCH_BUDGET,
) -> DomainChoice | None:
    """The domain of ``gang``'s required level to free and the victims inside it with the
    least lost work (see the module doc); None when no domain can be freed."""
    first = gang.members[0]
    request = tuple((r, q) for r, q in sorted(first.effective_requests.items()) if q > 0)
    mask = snapshot.eligibility(first, filters).mask
    schedulable = snapshot.columns.schedulable
    blocked_idx = set(snapshot.indices(blocked))
    rank = snapshot.rank(gang.topology.level)
    # Each candidate goes to the domains it has a member in: O(candidates), not
    # O(domains x candidates).
    index = snapshot.node_index_map
    where: dict[str, list[Victim]] = {}
    for victim in candidates:
        touched = set()
        for _, node in victim.pods:
            i = index.get(node)
            if i is None:
                continue
            for up in snapshot.ancestors(i):
                if up.rank == rank:
                    touched.add(up.name)
        for name in touched:
            where.setdefault(name, []).append(victim)
    domains = []
    for live in snapshot.live_domains(rank):
        nodes = [i for i in live.nodes
                 if mask[i] and schedulable[i] and i not in blocked_idx]
        if nodes and live.name in where:
            domains.append(_Domain(snapshot, live.name, nodes, request,
                                   len(gang.members), where[live.name]))
    search = _Search(budget, admits)
    bounds: list[tuple[float, str, _Domain]] = []
    for dom in domains:
        greedy = dom.greedy()
        if greedy is None:
            continue
        search.offer(dom, greedy)
        bounds.append((dom.cost(greedy), dom.name, dom))
    for _, _, dom in sorted(bounds, key=lambda b: b[:2]):
        if search.steps > search.budget:
            search.exact = False
            break
        search.run(dom)
    if search.best is None:
        return None
    _, _, dom, chosen = search.best
    chosen = dom.minimal(chosen, admits)
    victims = dom.victims(chosen)
    return DomainChoice(dom.name, victims, _cost(victims), search.exact)


def domain_nodes(snapshot: ClusterState, level: str, domain: str) -> frozenset[str]:
    """Names of the nodes of ``domain`` at ``level``."""
    nodes = snapshot.columns.nodes
    for dom in snapshot.live_domains(snapshot.rank(level)):
        if dom.name == domain:
            return frozenset(nodes[i].name for i in dom.nodes)
    return frozenset()
