"""The domain a starving gang reserves (``reservation_target``): where it could fit once
running pods finish, closest to fitting now."""

from __future__ import annotations

from collections.abc import Collection, Sequence
from collections.abc import Set as AbstractSet
from dataclasses import dataclass

from ..framework.interface import FilterPlugin, ScorePlugin
from ..framework.model import CPU, GPU, Gang, TopologyMode
from ..framework.resources import primary_resource
from ..plugins import DEFAULT_FILTERS, DEFAULT_SCORER
from ..state import BlockedNodes, ClusterState
from .search import Search, last_rank, min_depth


@dataclass(frozen=True, slots=True)
class ReservationTarget:
    """The domain a starving gang would need: see ``reservation_target``."""

    level: str
    domain: str
    nodes: frozenset[str]



def reservation_target(
    snapshot: ClusterState,
    gang: Gang,
    *,
    filters: Sequence[FilterPlugin] = DEFAULT_FILTERS,
    scorer: ScorePlugin = DEFAULT_SCORER,
    blocked: Collection[str] = (),
) -> ReservationTarget | None:
    """The domain to reserve for a starving ``gang``: at the smallest allowed rank where
    some domain avoiding ``blocked`` could hold the gang once its pods finish, the one
    with the most free primary resource now (closest to fitting), ties by name.
    None if no such domain exists (the gang can never fit there)."""
    if not gang.members or len(gang.members) < gang.required_members:
        return None
    if _too_few_unblocked(snapshot, gang, blocked):
        return None  # before last_rank: both answers are None, this one is O(1) mostly
    try:
        cap_rank, last = last_rank(snapshot, gang)
    except ValueError:
        return None
    required = gang.topology.mode is TopologyMode.REQUIRED
    node_depth = min_depth(snapshot, cap_rank) if required else 0
    search = Search(snapshot, gang, filters, scorer, blocked)
    masks = [g.mask for g in search.groups]
    for g in search.groups:
        g.static_mask = g.mask  # capacity base, but never the blocked nodes
    primary = search.primary
    cols = snapshot.columns
    nodes = cols.nodes
    grown = search.grown
    for rank in range(last + 1):
        members: tuple[int, ...] | None = None
        name = ""
        if rank == 0:
            i = _best_node_target(snapshot, search, masks, node_depth)
            if i is not None:
                members, name = (i,), nodes[i].name
        else:
            # The can-it-ever-fit pack reads capacity only, so trying candidates in the
            # order of the answer (most free now, then name) and stopping at the first
            # that packs gives the same domain as packing all of them.
            doms = snapshot.domains_holding(rank, search.total_items)
            if grown is not None and grown:
                # A domain whose unblocked nodes could not hold the gang even at the
                # largest node capacity cannot pack: skip it without packing (the
                # draining reserved domains have the most free GPUs, so they come first).
                least = -(-search.need // max(snapshot.max_capacity.get(primary, 0), 1))
                per = grown.per_domain
                doms = [d for d in doms if len(d.nodes) - per.get(id(d), 0) >= least]
            else:
                doms = list(doms)
            doms.sort(key=lambda d: (-d.free.get(primary, 0), d.name))
            for dom in doms:
                if search.pack(dom.nodes, cols.capacity, static=True) is not None:
                    members, name = dom.nodes, dom.name
                    break
        if members is not None:
            if grown is not None:
                free_names = grown.names_outside(members)
            else:
                held = blocked if isinstance(blocked, AbstractSet) else set(blocked)
                free_names = frozenset(
                    n for n in (nodes[i].name for i in members) if n not in held
                )
            return ReservationTarget(snapshot.level_names[rank], name, free_names)
    return None


def _too_few_unblocked(snapshot: ClusterState, gang: Gang, blocked: Collection[str]) -> bool:
    """True when the cycle's reservations leave fewer unblocked nodes than the gang needs
    even at the largest node capacity: then no rank has an answer (the node rank needs
    one unblocked node of that capacity, a domain that many unblocked nodes), so the
    answer is None without building a ``Search``. Same answer, O(members): under
    saturation the earlier starving gangs reserve the whole cluster, and every starving
    gang behind them asked again in every cycle (the spread policy at 10,000 nodes spent
    most of its time building searches that found nothing)."""
    if not isinstance(blocked, BlockedNodes) or blocked.snapshot is not snapshot or not blocked:
        return False
    unblocked = len(snapshot.columns.nodes) - len(blocked.indices)
    if unblocked <= 0:
        # Every node reserved: the answer is None unless the gang needs nothing of its
        # primary resource (GPUs if any member asks for some, else CPU); the first member
        # usually says so, without summing a large gang.
        return any(p.effective_requests.get(GPU, 0) > 0 for p in gang.members) or any(
            p.effective_requests.get(CPU, 0) > 0 for p in gang.members)
    totals: dict[str, int] = {}
    for pod in gang.members:
        for r, q in pod.effective_requests.items():
            totals[r] = totals.get(r, 0) + q
    primary = primary_resource(totals)
    need = totals.get(primary, 0)
    if need <= 0:
        return False
    least = -(-need // max(snapshot.max_capacity.get(primary, 0), 1))
    return unblocked < least


def _best_node_target(
    snapshot: ClusterState,
    search: Search,
    masks: Sequence[bytes | bytearray],
    node_depth: int,
) -> int | None:
    """The node rank of ``reservation_target``: among schedulable nodes allowed by every
    mask, deep enough, whose capacity holds the whole gang, the one with the most free
    primary resource now (negative counts as 0), ties by name. None if there is none.

    Without a full node scan when it can: no node is large enough (``max_capacity``), or
    for GPUs the free-GPU buckets (schedulable nodes by max(free GPUs, 0)) are walked
    from the fullest down and the first bucket with a fitting node holds the answer."""
    totals = search.total_items
    biggest = snapshot.max_capacity
    if any(biggest.get(r, 0) < q for r, q in totals):
        return None  # no schedulable node could ever hold the gang
    cols = snapshot.columns
    nodes, capacity = cols.nodes, cols.capacity

    if search.primary == GPU:
        # Each bucket in name order (``gpu_bucket_order``): masks first (they drop the
        # blocked nodes), and the first node that is deep and large enough is the answer.
        order = snapshot.gpu_bucket_order
        single = masks[0] if len(masks) == 1 else None

        def fits(i: int) -> bool:
            if not (single[i] if single is not None else all(m[i] for m in masks)):
                return False
            cap = capacity[i]
            return len(nodes[i].topology) >= node_depth and all(
                cap.get(r, 0) >= q for r, q in totals
            )

        held = search.grown.indices if search.grown is not None else None
        buckets = snapshot.gpu_buckets
        for free_gpus in sorted(order, reverse=True):
            bucket = buckets[free_gpus]
            if held and len(held) >= len(bucket) // 2:
                # Under starvation the fullest buckets are mostly reserved nodes that
                # drain: drop those in C, then take the rest by name rank.
                left = bucket - held
                if not left:
                    continue
                if len(left) * 2 < len(bucket):
                    ranks = snapshot.name_ranks
                    for i in sorted(left, key=ranks.__getitem__):
                        if fits(i):
                            return i
                    continue
            for _, i in order[free_gpus]:
                if fits(i):
                    return i
        return None
    primary = search.primary
    found: tuple[int, str, int] | None = None
    for i, free in enumerate(cols.free):
        cap = capacity[i]
        if (
            cols.schedulable[i]
            and all(m[i] for m in masks)
            and len(nodes[i].topology) >= node_depth
            and all(cap.get(r, 0) >= q for r, q in totals)
        ):
            rank_key = (-max(free.get(primary, 0), 0), nodes[i].name, i)
            if found is None or rank_key < found:
                found = rank_key
    return None if found is None else found[2]
