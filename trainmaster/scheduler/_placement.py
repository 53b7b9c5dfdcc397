"""The placement core: put a whole gang into the smallest switch domain that holds it.

Algorithm for one gang (nothing is mutated; the caller assumes the result):

1. Members are grouped by signature (requests + the filters' cache keys). Static
   filters give each signature a node mask, cached in the snapshot.
2. Ranks are tried smallest first: node, lowest level (leaf), ..., top level, cluster;
   a ``required`` constraint stops at its level, ``preferred`` goes on to the cluster.
3. At a rank, domains whose aggregate free capacity (kept up to date by the snapshot)
   covers the gang's total request are candidates, tried in best-fit order: least free
   primary resource (GPUs) first, i.e. least left afterwards, then by name.
4. Inside a candidate, each signature group (largest pods first) is packed best-fit:
   nodes sorted by the score plugin (default: least GPUs left), each filled before the
   next. For a gang of identical pods this is exact (it fails only if the domain cannot
   hold the gang); mixed gangs are packed greedily.
5. The first candidate that packs wins; if none at any allowed rank, the gang gets an
   ``Unschedulable`` with the best domain's free vs. needed GPUs and per-node reasons,
   coded ``UNSCHEDULABLE_AND_UNRESOLVABLE`` if it could not fit even in an empty cluster.

Cost per gang: O(nodes) for the node rank, O(domains) aggregate checks per rank, and
O(nodes in the tried domains) for packing, never O(pods x nodes x domains). The snapshot
is read through its by-index API (``columns``, ``live_domains``, ``eligibility``): live
views, no copies.
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Collection, Hashable, Mapping, Sequence
from collections.abc import Set as AbstractSet
from dataclasses import dataclass
from typing import Protocol

from ._blocked import BlockedNodes
from ._contracts import FilterPlugin, ScorePlugin
from ._filters import fit_count
from ._framework import DEFAULT_FILTERS, DEFAULT_SCORER
from ._model import CLUSTER_LEVEL, GPU, Gang, PodRequest, TopologyMode
from ._score import BestFit, primary_resource
from ._snapshot import ClusterSnapshot, LiveDomain
from ._status import Code


@dataclass(frozen=True, slots=True)
class Binding:
    pod: PodRequest
    node: str


@dataclass(frozen=True, slots=True)
class Placement:
    """Where every member of ``gang`` goes, inside one domain of ``level``."""

    gang: str
    level: str
    domain: str
    bindings: tuple[Binding, ...]

    def nodes_by_pod(self) -> dict[str, str]:
        """Pod key (``namespace/name``) -> node name."""
        return {b.pod.key: b.node for b in self.bindings}


@dataclass(frozen=True, slots=True)
class Unschedulable:
    """The gang cannot be placed; nothing was placed."""

    gang: str
    reason: str
    code: Code = Code.UNSCHEDULABLE


@dataclass(frozen=True, slots=True)
class ReservationTarget:
    """The domain a starving gang would need: see ``reservation_target``."""

    level: str
    domain: str
    nodes: frozenset[str]


@dataclass(slots=True)
class _Group:
    pods: list[PodRequest]
    requests: Mapping[str, int]
    items: tuple[tuple[str, int], ...]
    static_mask: bytes | bytearray
    mask: bytes | bytearray
    reasons: Sequence[str | None]


Assignment = list[tuple[PodRequest, int]]
_Base = Sequence[Mapping[str, int]]


class _Search:
    def __init__(
        self,
        snapshot: ClusterSnapshot,
        gang: Gang,
        filters: Sequence[FilterPlugin],
        scorer: ScorePlugin,
        blocked: Collection[str],
    ) -> None:
        self.snap = snapshot
        self.cols = snapshot.columns
        self.gang = gang
        bind = getattr(scorer, "bind", None)  # a scorer that needs the gang and nodes
        self.scorer: ScorePlugin = (bind(gang, self.cols.nodes, self.cols.allocatable)
                                    if bind is not None else scorer)
        signatures: dict[tuple[object, Hashable], list[PodRequest]] = {}
        for pod in gang.members:
            key = (tuple(sorted(pod.effective_requests.items())), snapshot.pod_key(pod, filters))
            signatures.setdefault(key, []).append(pod)
        # A cycle's BlockedNodes keeps its masked copies up to date: no per-call
        # name -> index conversion of the whole set.
        grown = (
            blocked
            if isinstance(blocked, BlockedNodes) and blocked.snapshot is snapshot
            else None
        )
        self.grown = grown
        blocked_idx = snapshot.indices(blocked) if grown is None else ()
        self.groups: list[_Group] = []
        totals: dict[str, int] = {}
        for (_, fkey), pods in signatures.items():
            first = pods[0]
            elig = snapshot.eligibility(first, filters, fkey)
            mask: bytes | bytearray = elig.mask
            if grown is not None:
                mask = grown.masked(mask)
            elif blocked_idx:
                mask = bytearray(mask)
                for i in blocked_idx:
                    mask[i] = 0
            requests = first.effective_requests
            for r, q in requests.items():
                totals[r] = totals.get(r, 0) + q * len(pods)
            pods.sort(key=lambda p: p.key)
            self.groups.append(
                _Group(pods, requests, tuple(requests.items()), elig.mask, mask, elig.reasons)
            )
        self.primary = primary_resource(totals)
        self.groups.sort(
            key=lambda g: (
                -g.requests.get(self.primary, 0),
                -sum(g.requests.values()),
                -len(g.pods),
            )
        )
        self.totals = totals
        self.total_items = tuple(totals.items())
        self.need = totals.get(self.primary, 0)

    # --- one rank ---------------------------------------------------------------------

    def on_node(self, base: _Base, min_depth: int, static: bool) -> int | None:
        """Best-fit single node holding the whole gang, or None."""
        snap, cols = self.snap, self.cols
        biggest = snap.max_capacity
        totals = self.total_items
        if any(biggest.get(r, 0) < q for r, q in totals):
            return None  # no node is large enough, however empty
        primary, need = self.primary, self.need
        masks = [g.static_mask if static else g.mask for g in self.groups]
        mask = masks[0] if len(masks) == 1 else bytearray(map(min, zip(*masks, strict=True)))
        nodes = cols.nodes
        if primary == GPU and not static and type(self.scorer) is BestFit:
            # Same answer as the scan below (least free GPUs, then name) via the buckets,
            # each kept in name order: the walk stops at the first fitting node.
            order = snap.gpu_bucket_order
            for free_gpus in sorted(k for k in order if k >= need):
                for _, i in order[free_gpus]:
                    if (
                        mask[i]
                        and len(nodes[i].topology) >= min_depth
                        and fit_count(totals, base[i]) >= 1
                    ):
                        return i
            return None
        alloc = cols.allocatable
        score = self.scorer.score
        best_key: tuple[int, str, int] | None = None
        for i, free in enumerate(base):
            if free.get(primary, 0) < need or not mask[i]:
                continue
            if min_depth and len(nodes[i].topology) < min_depth:
                continue
            if fit_count(totals, free) < 1:
                continue
            key = (-score(self.totals, free, alloc[i]), nodes[i].name, i)
            if best_key is None or key < best_key:
                best_key = key
        return None if best_key is None else best_key[2]

    def candidates(self, rank: int, static: bool, ordered: bool = True) -> list[LiveDomain]:
        """Domains at ``rank`` whose free (or, ``static``, capacity) covers the gang,
        best fit first (least free, then name) unless not ``ordered``."""
        totals = self.total_items
        domains = self.snap.live_domains(rank)
        if len(totals) == 1:  # one resource (GPUs): no generator per domain
            ((r, q),) = totals
            if static:
                doms = [d for d in domains if d.capacity.get(r, 0) >= q]
            else:
                doms = [d for d in domains if d.free.get(r, 0) >= q]
        elif static:
            doms = [d for d in domains if all(d.capacity.get(r, 0) >= q for r, q in totals)]
        else:
            doms = [d for d in domains if all(d.free.get(r, 0) >= q for r, q in totals)]
        if ordered:
            primary = self.primary
            doms.sort(key=lambda d: (d.free.get(primary, 0), d.name))
        return doms

    def pack(self, nodes: Sequence[int], base: _Base, static: bool) -> Assignment | None:
        """Best-fit every group into ``nodes``; None if some group does not fit."""
        overlay: dict[int, dict[str, int]] = {}
        out: Assignment = []
        score = self.scorer.score
        alloc = self.cols.allocatable
        names = self.cols.nodes
        for group in self.groups:
            mask = group.static_mask if static else group.mask
            items = group.items
            requests = group.requests
            count = len(group.pods)
            cands: list[tuple[int, str, int, int]] = []
            room = 0
            for i in nodes:
                if not mask[i]:
                    continue
                free: Mapping[str, int] | None = overlay.get(i)
                if free is None:
                    free = base[i]
                slots = fit_count(items, free)
                if slots:
                    room += slots
                    cands.append((-score(requests, free, alloc[i]), names[i].name, i, slots))
            if room < count:
                return None
            cands.sort()  # best score, then name (indices are not in name order)
            placed = 0
            for _, _, i, slots in cands:
                take = min(slots, count - placed)
                mine = overlay.get(i)
                if mine is None:
                    mine = overlay[i] = dict(base[i])
                for r, q in items:
                    mine[r] = mine.get(r, 0) - q * take
                out.extend((pod, i) for pod in group.pods[placed : placed + take])
                placed += take
                if placed == count:
                    break
        return out

    def at_rank(
        self, rank: int, min_depth: int, static: bool = False
    ) -> tuple[str, Assignment] | None:
        base: _Base = self.cols.capacity if static else self.cols.free
        if rank == 0:
            i = self.on_node(base, min_depth, static)
            if i is None:
                return None
            return self.cols.nodes[i].name, [(p, i) for g in self.groups for p in g.pods]
        for dom in self.candidates(rank, static):
            assignment = self.pack(dom.nodes, base, static)
            if assignment is not None:
                return dom.name, assignment
        return None

    # --- diagnostics ------------------------------------------------------------------

    def best_free(self, rank: int) -> tuple[str, int]:
        """The domain at ``rank`` with the most free primary resource."""
        cols, primary = self.cols, self.primary
        if rank == 0:
            pairs = [
                (max(f.get(primary, 0), 0), n.name)
                for f, n, ok in zip(cols.free, cols.nodes, cols.schedulable, strict=True)
                if ok
            ]
        else:
            pairs = [(d.free.get(primary, 0), d.name) for d in self.snap.live_domains(rank)]
        if not pairs:
            return "-", 0
        free, name = min(pairs, key=lambda p: (-p[0], p[1]))
        return name, free

    def node_summary(self) -> str:
        """Why nodes reject one pod of the largest group, kube-scheduler style."""
        group = self.groups[0]
        cols = self.cols
        counts: Counter[str] = Counter()
        fits = 0
        items = sorted(group.items)
        for i, free in enumerate(cols.free):
            if not group.static_mask[i]:
                counts[group.reasons[i] or "node(s) were unschedulable"] += 1
            elif not group.mask[i]:
                counts["node(s) reserved for a starving gang"] += 1
            else:
                for r, q in items:
                    if free.get(r, 0) < q:
                        counts[f"Insufficient {r}"] += 1
                        break
                else:
                    fits += 1
        parts = [f"{n} {why}" for why, n in sorted(counts.items(), key=lambda kv: (-kv[1], kv[0]))]
        detail = f": {', '.join(parts)}" if parts else ""
        return f"{fits}/{len(cols.nodes)} nodes fit one {group.pods[0].key}-like pod{detail}"


def _min_depth(snapshot: ClusterSnapshot, rank: int) -> int:
    """Path length a node needs to belong to a domain at ``rank`` (0 for node/cluster)."""
    depth = len(snapshot.levels)
    return 0 if rank in (0, depth + 1) else depth + 1 - rank


def _last_rank(snapshot: ClusterSnapshot, gang: Gang) -> tuple[int, int]:
    """(constraint rank, last rank to try)."""
    rank = snapshot.rank(gang.topology.level)
    top = len(snapshot.levels) + 1
    return rank, rank if gang.topology.mode is TopologyMode.REQUIRED else top


class Placer(Protocol):
    """``place_gang``'s signature: the simulator plugs baseline policies in here (into
    the queue's cycles and the preemption's victim search)."""

    def __call__(
        self,
        snapshot: ClusterSnapshot,
        gang: Gang,
        *,
        filters: Sequence[FilterPlugin],
        scorer: ScorePlugin,
        blocked: Collection[str],
    ) -> Placement | Unschedulable: ...


def place_gang(
    snapshot: ClusterSnapshot,
    gang: Gang,
    *,
    filters: Sequence[FilterPlugin] = DEFAULT_FILTERS,
    scorer: ScorePlugin = DEFAULT_SCORER,
    blocked: Collection[str] = (),
) -> Placement | Unschedulable:
    """Place every member of ``gang`` or none. Does not modify ``snapshot``.

    ``blocked`` names nodes the gang must not use (capacity reserved for a starving gang
    ahead of it in the queue).
    """
    if not gang.members:
        return Unschedulable(gang.key, f"gang {gang.key} has no members", Code.WAIT)
    if len(gang.members) < gang.required_members:
        return Unschedulable(
            gang.key,
            f"gang {gang.key}: {len(gang.members)} of minMember {gang.required_members} pods exist",
            Code.WAIT,
        )
    try:
        cap_rank, last = _last_rank(snapshot, gang)
    except ValueError as err:
        return Unschedulable(
            gang.key, f"gang {gang.key}: {err}", Code.UNSCHEDULABLE_AND_UNRESOLVABLE
        )
    search = _Search(snapshot, gang, filters, scorer, blocked)
    required = gang.topology.mode is TopologyMode.REQUIRED
    node_depth = _min_depth(snapshot, cap_rank) if required else 0
    for rank in range(last + 1):
        found = search.at_rank(rank, node_depth)
        if found is not None:
            domain, assignment = found
            nodes = snapshot.columns.nodes
            return Placement(
                gang.key,
                snapshot.level_names[rank],
                domain,
                tuple(Binding(pod, nodes[i].name) for pod, i in assignment),
            )
    return _explain(search, last, node_depth)


def _explain(search: _Search, last: int, node_depth: int) -> Unschedulable:
    snap, gang = search.snap, search.gang
    level = snap.level_names[last]
    where, free = search.best_free(last)
    topo = gang.topology
    head = f"gang {gang.key} ({len(gang.members)} pods, topology {topo.mode} {topo.level})"
    if level == CLUSTER_LEVEL:
        what = f"{head} does not fit in the cluster: {free} free {search.primary}"
    else:
        what = (
            f"{head} fits in no single {level}: best {level} {where} has "
            f"{free} free {search.primary}"
        )
    what += f", needs {search.need}"
    # Smallest first: a gang that fits an empty leaf is found after one small pack.
    ever = any(search.at_rank(r, node_depth, static=True) for r in range(last + 1))
    code = Code.UNSCHEDULABLE if ever else Code.UNSCHEDULABLE_AND_UNRESOLVABLE
    never = "" if ever else "; it cannot fit even with every scheduled pod gone"
    return Unschedulable(gang.key, f"{what}{never}; {search.node_summary()}", code)


def reservation_target(
    snapshot: ClusterSnapshot,
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
    try:
        cap_rank, last = _last_rank(snapshot, gang)
    except ValueError:
        return None
    required = gang.topology.mode is TopologyMode.REQUIRED
    node_depth = _min_depth(snapshot, cap_rank) if required else 0
    search = _Search(snapshot, gang, filters, scorer, blocked)
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


def _best_node_target(
    snapshot: ClusterSnapshot,
    search: _Search,
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
