"""One gang's placement search over the cluster state (the engine ``place_gang`` and
``reservation_target`` drive).

Members are grouped by signature (requests + the filters' cache keys); each group gets
its static-filter node mask from the state (with the cycle's blocked nodes masked out).
``at_rank`` tries the domains of one rank in the profile's domain-choice order and packs
every group best-first by the profile's score stage; ``on_node`` is the single-node rank,
which walks the state's free-GPU index when the one active scorer declares that order
(``LEAST_FREE_GPUS``). Nothing is mutated. The state is read through its by-index API
(``columns``, ``live_domains``, ``eligibility``): live views, no copies.
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Collection, Hashable, Mapping, Sequence
from dataclasses import dataclass
from typing import cast

from ..framework.interface import LEAST_FREE_GPUS, FilterPlugin, LiveDomain, ScorePlugin
from ..framework.model import GPU, Gang, PodRequest, TopologyMode
from ..framework.resources import fit_count, primary_resource
from ..framework.scoring import Scoring
from ..plugins.topology import TightestDomain
from ..state import BlockedNodes, ClusterState

_TIGHTEST = TightestDomain()


@dataclass(slots=True)
class _Group:
    pods: list[PodRequest]
    requests: Mapping[str, int]
    items: tuple[tuple[str, int], ...]
    static_mask: bytes | bytearray
    mask: bytes | bytearray
    reasons: Sequence[str | None]
    signature: tuple[object, Hashable]
    """(requests, the filters' cache key): equal signatures, equal masks."""


Assignment = list[tuple[PodRequest, int]]
_Base = Sequence[Mapping[str, int]]


class Search:
    def __init__(
        self,
        snapshot: ClusterState,
        gang: Gang,
        filters: Sequence[FilterPlugin],
        scorer: ScorePlugin,
        blocked: Collection[str],
    ) -> None:
        self.snap = snapshot
        self.cols = snapshot.columns
        self.gang = gang
        stage = Scoring.of(scorer)
        scoring = stage.for_gang(gang)  # every pre_score, once per attempt
        self.score = scoring.score
        self.indexed = scoring.index == LEAST_FREE_GPUS
        self.domain_choice = stage.domain_choice or _TIGHTEST
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
        for signature, pods in signatures.items():
            fkey = signature[1]
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
                _Group(pods, requests, tuple(requests.items()), elig.mask, mask, elig.reasons,
                       signature)
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
        if primary == GPU and not static and self.indexed:
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
        score = self.score
        best_key: tuple[int, str, int] | None = None
        for i, free in enumerate(base):
            if free.get(primary, 0) < need or not mask[i]:
                continue
            if min_depth and len(nodes[i].topology) < min_depth:
                continue
            if fit_count(totals, free) < 1:
                continue
            key = (-score(nodes[i], self.totals, free), nodes[i].name, i)
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
            self.domain_choice.order_domains(doms, self.primary)
        return doms

    def pack(self, nodes: Sequence[int], base: _Base, static: bool) -> Assignment | None:
        """Best-fit every group into ``nodes``; None if some group does not fit."""
        overlay: dict[int, dict[str, int]] = {}
        out: Assignment = []
        score = self.score
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
                    node = names[i]
                    cands.append((-score(node, requests, free), node.name, i, slots))
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

    def shape(self) -> tuple[object, ...]:
        """What the answers below depend on besides the state: the groups' signatures
        and sizes (in packing order) and the topology."""
        topo = self.gang.topology
        return (tuple((g.signature, len(g.pods)) for g in self.groups), topo.level,
                topo.mode)

    def best_free(self, rank: int) -> tuple[str, int]:
        """The domain at ``rank`` with the most free primary resource (memoised until a
        pod or node changes: every gang that fails in between asks the same)."""
        memo = self.snap.memo()
        key = ("best_free", rank, self.primary)
        found = memo.get(key)
        if found is None:
            found = memo[key] = self._best_free(rank)
        return cast("tuple[str, int]", found)

    def _best_free(self, rank: int) -> tuple[str, int]:
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
        memo = self.snap.memo()
        key = ("node_summary", group.signature, bytes(group.mask))
        found = memo.get(key)
        if found is None:
            found = memo[key] = self._node_counts(group)
        fits, detail = cast("tuple[int, str]", found)
        return f"{fits}/{len(self.cols.nodes)} nodes fit one {group.pods[0].key}-like pod{detail}"

    def _node_counts(self, group: _Group) -> tuple[int, str]:
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
        return fits, f": {', '.join(parts)}" if parts else ""


def min_depth(snapshot: ClusterState, rank: int) -> int:
    """Path length a node needs to belong to a domain at ``rank`` (0 for node/cluster)."""
    depth = len(snapshot.levels)
    return 0 if rank in (0, depth + 1) else depth + 1 - rank


def last_rank(snapshot: ClusterState, gang: Gang) -> tuple[int, int]:
    """(constraint rank, last rank to try)."""
    rank = snapshot.rank(gang.topology.level)
    top = len(snapshot.levels) + 1
    return rank, rank if gang.topology.mode is TopologyMode.REQUIRED else top
