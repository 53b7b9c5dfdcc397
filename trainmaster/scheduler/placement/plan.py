"""Joint placement of a burst of new gangs: which leaf each one goes to.

Why: placing gangs one by one in queue order (best fit each) is good when they arrive
one at a time, but when many arrive together (a sweep submitted at once, a restart, a
benchmark) greedy order leaves holes that no remaining gang fits whole, and the last
gangs get split over leaves. Choosing the leaves for the whole burst together is a bin
packing problem; solving it (near) optimally keeps gangs whole.

What is planned: a queue made only of *fresh* gangs (never tried before, so no fairness
or starvation state is at stake) of one priority. Of those, the gangs bound to one leaf
or one node, asking for GPUs and sharing one set of node constraints (selector,
affinity, tolerations: they compete for the same nodes) are planned; the others wait
for the second cycle, after the planned ones. Capacity is free GPUs per leaf on those nodes, counted
in whole pods per node when every gang has the same pod size. The plan is only a hint: each planned
gang is pinned to its leaf for one cycle and the placement core still checks every
node; a gang that does not fit there after all is simply scheduled unpinned.

Solver: an exact depth-first search (largest gang first, best-fit leaf order, leaves
with equal room tried once, stop when the wasted room exceeds the slack) with a step
budget; if it finds no plan for every gang, minimum-bin-slack: fill the tightest leaf
with the subset of gangs that leaves the least room (subset sum, larger gangs first),
then the next. Gangs left out are scheduled normally after the planned ones.
"""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from functools import reduce

from ..framework.interface import FilterPlugin, filter_key
from ..framework.model import GPU, NODE_LEVEL, Gang
from ..plugins import DEFAULT_FILTERS
from ..state import ClusterState

DFS_BUDGET = 5_000
DP_LIMIT = 4_096


@dataclass(frozen=True, slots=True)
class BatchPlan:
    assigned: Mapping[str, str]
    """Gang key -> domain name (e.g. ``spine-0/leaf-3``) at the planned level."""
    left_out: tuple[str, ...]
    """Planned-for gangs that get no domain: scheduled after the others, unpinned."""
    exact: bool
    """True when every gang got a domain."""


def plannable(gang: Gang, level: str, filters: Sequence[FilterPlugin] = DEFAULT_FILTERS) -> bool:
    """A complete gang at ``level`` or on one node (it sits in one domain of ``level``
    either way) whose members all ask for GPUs and share one set of node constraints
    (equal cache keys for ``filters``: selector, affinity, tolerations by default)."""
    if gang.topology.level not in (level, NODE_LEVEL) or not gang.members or gang.elastic:
        return False  # an elastic gang's size is the cycle's choice, not the plan's
    if len(gang.members) < gang.required_members:
        return False
    key = filter_key(gang.members[0], filters)
    return all(
        p.requests.get(GPU, 0) > 0 and filter_key(p, filters) == key for p in gang.members
    )


def batch_of(
    gangs: Sequence[Gang], filters: Sequence[FilterPlugin] = DEFAULT_FILTERS
) -> list[Gang]:
    """The largest subset sharing one constraint set: they compete for the same nodes."""
    groups: dict[object, list[Gang]] = {}
    for gang in gangs:
        groups.setdefault(filter_key(gang.members[0], filters), []).append(gang)
    return max(groups.values(), key=len, default=[])


def _capacity(
    snapshot: ClusterState,
    level: str,
    pod_gpus: int | None,
    eligible: Sequence[int],
) -> dict[str, int]:
    """Free GPUs per domain of ``level`` on eligible nodes (whole pods' worth when all
    pods have ``pod_gpus``)."""
    out: dict[str, int] = {}
    node_free = snapshot.columns.free
    for dom in snapshot.live_domains(snapshot.rank(level)):
        total = 0
        for i in dom.nodes:
            if not eligible[i]:
                continue
            free = max(node_free[i].get(GPU, 0), 0)
            total += free - free % pod_gpus if pod_gpus else free
        out[dom.name] = total
    return out


def _dfs(sizes: list[int], caps: list[int], budget: int) -> list[int] | None:
    """Bin index per item with every item placed, or None (infeasible or over budget)."""
    return exact_packing(sizes, caps, budget)[0]


def exact_packing(
    sizes: Sequence[int], caps: Sequence[int], budget: int
) -> tuple[list[int] | None, bool]:
    """(bin index per item, or None; whether the search finished). A finished search
    that found nothing proves no packing of every item exists."""
    order = sorted(range(len(sizes)), key=lambda i: -sizes[i])
    slack = sum(caps) - sum(sizes)
    if slack < 0 or not order:
        return (None, True) if order else ([], True)
    room = list(caps)
    where = [-1] * len(sizes)
    smallest_after = [0] * (len(order) + 1)
    smallest = math.inf
    for k in range(len(order) - 1, -1, -1):
        smallest = min(smallest, sizes[order[k]])
        smallest_after[k] = int(smallest)
    smallest_after[len(order)] = 0
    steps = 0

    def search(k: int) -> bool:
        nonlocal steps
        if k == len(order):
            return True
        steps += 1
        if steps > budget:
            raise TimeoutError
        least = smallest_after[k]
        if sum(r for r in room if r < least) > slack:
            return False  # more room is wasted than the slack allows
        size = sizes[order[k]]
        # Best fit first; leaves with the same room left are interchangeable: try one.
        for r in sorted(set(room)):
            if r < size:
                continue
            b = room.index(r)
            room[b] -= size
            where[order[k]] = b
            if search(k + 1):
                return True
            room[b] += size
        where[order[k]] = -1
        return False

    try:
        return (where if search(0) else None), True
    except TimeoutError:
        return None, False


def _best_subset(items: list[tuple[int, int]], cap: int) -> list[int]:
    """Positions in ``items`` (size, id; largest first) of the subset with the largest
    total <= ``cap``; among equal totals, the one reached with larger items first."""
    reach: dict[int, tuple[int, ...]] = {0: ()}
    for pos, (size, _) in enumerate(items):
        for total, chosen in list(reach.items()):
            new = total + size
            if new <= cap and new not in reach:
                reach[new] = (*chosen, pos)
        if cap in reach:
            break
    return list(reach[max(reach)])


def _min_bin_slack(sizes: list[int], caps: list[int]) -> list[int]:
    """Greedy bin by bin (tightest first): bin index per item, -1 if left out."""
    where = [-1] * len(sizes)
    g = reduce(math.gcd, [*sizes, *caps], 0) or 1
    items = sorted(((s // g, i) for i, s in enumerate(sizes)), reverse=True)
    for b in sorted(range(len(caps)), key=lambda b: (caps[b], b)):
        cap = caps[b] // g
        if not items or cap <= 0:
            continue
        if cap > DP_LIMIT:  # too large to enumerate: first fit, largest first
            chosen, used = [], 0
            for pos, (size, _) in enumerate(items):
                if used + size <= cap:
                    chosen.append(pos)
                    used += size
        else:
            chosen = _best_subset(items, cap)
        for pos in chosen:
            where[items[pos][1]] = b
        keep = set(chosen)
        items = [it for pos, it in enumerate(items) if pos not in keep]
    return where


def plan_batch(
    snapshot: ClusterState,
    gangs: Sequence[Gang],
    level: str,
    filters: Sequence[FilterPlugin] = DEFAULT_FILTERS,
    budget: int = DFS_BUDGET,
) -> BatchPlan:
    """Assign each gang (all with the same node constraints, see ``batch_of``) a domain
    of ``level`` so that as many as possible fit whole."""
    if not gangs:
        return BatchPlan({}, (), True)
    # Nodes the static filters (cordon, selector, affinity, taints) let these pods use.
    eligible = snapshot.eligibility(gangs[0].members[0], filters).mask
    pod_sizes = {p.requests.get(GPU, 0) for g in gangs for p in g.members}
    pod_gpus = pod_sizes.pop() if len(pod_sizes) == 1 else None
    capacity = _capacity(snapshot, level, pod_gpus, eligible)
    domains = sorted(capacity)
    caps = [capacity[d] for d in domains]
    sizes = [sum(p.requests.get(GPU, 0) for p in g.members) for g in gangs]
    # Each search step is O(domains): keep the worst case to a few tens of milliseconds.
    where = _dfs(sizes, caps, min(budget, 400_000 // max(len(caps), 1)))
    exact = where is not None
    if where is None:
        where = _min_bin_slack(sizes, caps)
    assigned = {g.key: domains[b] for g, b in zip(gangs, where, strict=True) if b >= 0}
    left = tuple(g.key for g, b in zip(gangs, where, strict=True) if b < 0)
    return BatchPlan(assigned, left, exact)
