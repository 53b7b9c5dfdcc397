"""The cluster state's capacity aggregates: topology domains, GPU buckets, largest capacity.

Every pod charge and node change updates, in O(levels x resources), the free and
capacity sums of each enclosing switch domain, the free-GPU buckets (schedulable nodes
by free GPUs, also kept in name order per bucket) and the largest capacity per
resource, so the placement never re-sums nodes. Cordoned nodes have no share. A mixin
of ``ClusterState`` (``cluster_state.py``), which owns the node columns.
"""

from __future__ import annotations

import bisect
from collections.abc import Hashable, Iterator, Mapping, Sequence
from collections.abc import Set as AbstractSet

from ..framework.model import CLUSTER_LEVEL, GPU, NODE_LEVEL, NodeInfo
from .views import (
    ELIGIBILITY_CACHE_SIZE,
    Domain,
    HoldingKey,
    LiveDomain,
    add_into,
    domain_path,
    drop_zeros,
)


class CapacityIndex:
    """Domain and bucket aggregates (see the module doc)."""

    _levels: tuple[str, ...]
    _nodes: list[NodeInfo]
    _node_version: int
    _name_ranks: list[int] | None
    _holding: tuple[int, dict[HoldingKey, tuple[LiveDomain, ...]]]
    _requested: list[dict[str, int]]
    _free: list[dict[str, int]]
    _capacity: list[dict[str, int]]
    _schedulable: list[bool]
    _capacity_counts: dict[str, dict[int, int]]
    _pod_version: int
    _memo: tuple[tuple[int, int], dict[Hashable, object]]
    _static_memo: tuple[int, dict[Hashable, object]]
    _max_capacity: dict[str, int]
    _gpu_buckets: dict[int, set[int]]
    _gpu_order: dict[int, list[tuple[str, int]]]
    _domains: list[list[Domain]]
    _domain_by_path: list[dict[tuple[str, ...], Domain]]
    _ancestors: list[list[Domain]]
    _max_capacity_view: Mapping[str, int]
    _gpu_buckets_view: Mapping[int, AbstractSet[int]]
    _gpu_order_view: Mapping[int, Sequence[tuple[str, int]]]

    @property
    def level_names(self) -> tuple[str, ...]:
        """All levels smallest first: ``("node", "leaf", "spine", "cluster")``."""
        return (NODE_LEVEL, *reversed(self._levels), CLUSTER_LEVEL)

    def _paths(self, path: tuple[str, ...]) -> Iterator[tuple[int, tuple[str, ...]]]:
        """(rank, domain path) of every domain a node with topology ``path`` is in."""
        depth = len(self._levels)
        for rank in range(1, depth + 2):
            prefix_len = depth + 1 - rank
            if len(path) >= prefix_len:
                yield rank, path[:prefix_len]

    def _account(self, i: int, sign: int) -> None:
        """Add (``sign`` 1) or take away (-1) node ``i``'s share of every aggregate: its
        domains' free and capacity, the GPU buckets, the capacity counts. A cordoned
        node has no share."""
        if not self._schedulable[i]:
            return
        positive = self._positive(self._free[i])
        capacity = self._capacity[i]
        for dom in self._ancestors[i]:
            add_into(dom.free, positive, sign)
            add_into(dom.capacity, capacity, sign)
            if sign < 0:
                drop_zeros(dom.free, positive)
                drop_zeros(dom.capacity, capacity)
        gpus = max(self._free[i].get(GPU, 0), 0)
        if sign > 0:
            self._gpu_buckets.setdefault(gpus, set()).add(i)
            self._order_add(gpus, i)
        else:
            bucket = self._gpu_buckets[gpus]
            bucket.discard(i)
            if not bucket:
                del self._gpu_buckets[gpus]
            self._order_drop(gpus, i)
        counts, biggest = self._capacity_counts, self._max_capacity
        for r, q in capacity.items():
            per = counts.setdefault(r, {})
            left = per.get(q, 0) + sign
            if left:
                per[q] = left
            else:
                del per[q]
            if sign > 0:
                if q > biggest.get(r, -1):
                    biggest[r] = q
            elif not per:
                del counts[r]
                del biggest[r]
            elif biggest[r] == q and not left:
                biggest[r] = max(per)

    def _join(self, i: int, node: NodeInfo) -> None:
        """Put node ``i`` into the domains of its topology path (created as needed)."""
        ancestors = self._ancestors[i]
        for rank, path in self._paths(node.topology):
            dom = self._domain_by_path[rank].get(path)
            if dom is None:
                dom = Domain(self.level_names[rank], rank, "/".join(path) or CLUSTER_LEVEL,
                              (), path)
                row = self._domains[rank]
                row.insert(bisect.bisect_left(row, path, key=domain_path), dom)
                self._domain_by_path[rank][path] = dom
            dom.nodes = (*dom.nodes, i)
            ancestors.append(dom)

    def _leave(self, i: int) -> None:
        """Take node ``i`` out of its domains (an emptied domain goes, as in a rebuild)."""
        for dom in self._ancestors[i]:
            at = dom.nodes.index(i)
            dom.nodes = dom.nodes[:at] + dom.nodes[at + 1 :]
            if not dom.nodes:
                row = self._domains[dom.rank]
                del row[bisect.bisect_left(row, dom.path, key=domain_path)]
                del self._domain_by_path[dom.rank][dom.path]
        self._ancestors[i] = []

    @staticmethod
    def _positive(free: Mapping[str, int]) -> dict[str, int]:
        return {r: q for r, q in free.items() if q > 0}

    def _charge(self, i: int, requests: Mapping[str, int], sign: int) -> None:
        self._pod_version += 1
        free = self._free[i]
        requested = self._requested[i]
        schedulable = self._schedulable[i]
        ancestors = self._ancestors[i] if schedulable else ()
        for resource, qty in requests.items():
            requested[resource] = requested.get(resource, 0) + sign * qty
            before = free.get(resource)
            if before is None:  # not allocatable here: free has no entry, as in a rebuild
                continue
            after = before - sign * qty
            free[resource] = after
            delta = max(after, 0) - max(before, 0)
            if delta:
                for dom in ancestors:
                    dom.free[resource] = dom.free.get(resource, 0) + delta
                if resource == GPU and schedulable:
                    self._move_bucket(i, max(before, 0), max(after, 0))

    def _move_bucket(self, i: int, before: int, after: int) -> None:
        buckets = self._gpu_buckets
        old = buckets[before]
        old.discard(i)
        if not old:
            del buckets[before]
        buckets.setdefault(after, set()).add(i)
        self._order_drop(before, i)
        self._order_add(after, i)

    def _order_add(self, gpus: int, i: int) -> None:
        bisect.insort(self._gpu_order.setdefault(gpus, []), (self._nodes[i].name, i))

    def _order_drop(self, gpus: int, i: int) -> None:
        row = self._gpu_order[gpus]
        del row[bisect.bisect_left(row, (self._nodes[i].name, i))]
        if not row:
            del self._gpu_order[gpus]

    def live_domains(self, rank: int) -> Sequence[LiveDomain]:
        """The domains at ``rank`` (1 = lowest level ... ``len(levels) + 1`` = cluster),
        by name, live. Rank 0 (single nodes) has none (empty): nodes are in ``columns``."""
        if not 0 <= rank < len(self._domains):
            raise ValueError(f"no rank {rank}; ranks 0..{len(self._domains) - 1}")
        return self._domains[rank]

    def domains_holding(
        self, rank: int, totals: tuple[tuple[str, int], ...]
    ) -> Sequence[LiveDomain]:
        """The domains at ``rank`` whose ``capacity`` covers every (resource, quantity) of
        ``totals``, by name. Capacity changes only with node specs, so the answer is kept
        until the next node change. Read-only."""
        cache = self._holding
        if cache[0] != self._node_version:
            cache = self._holding = (self._node_version, {})
        key = (rank, totals)
        found = cache[1].get(key)
        if found is None:
            if len(cache[1]) >= ELIGIBILITY_CACHE_SIZE:
                cache[1].clear()
            found = cache[1][key] = tuple(
                d
                for d in self.live_domains(rank)
                if all(d.capacity.get(r, 0) >= q for r, q in totals)
            )
        return found

    @property
    def node_version(self) -> int:
        """Changes whenever a node is added, removed or given a new spec (pods do not
        change it): lets callers keep answers about node specs until it moves."""
        return self._node_version

    def memo(self) -> dict[Hashable, object]:
        """A scratch cache for answers derived from the whole state (a failed gang's
        explanation): emptied whenever a pod is charged or released or a node changes.
        Why: in a deep queue many gangs of the same shape fail between two changes."""
        stamp = (self._node_version, self._pod_version)
        if self._memo[0] != stamp:
            self._memo = (stamp, {})
        return self._memo[1]

    def static_memo(self) -> dict[Hashable, object]:
        """``memo`` for answers about node specs only (whether a gang could ever fit):
        emptied only when a node changes."""
        if self._static_memo[0] != self._node_version:
            self._static_memo = (self._node_version, {})
        return self._static_memo[1]

    @property
    def max_capacity(self) -> Mapping[str, int]:
        """Per resource, the largest ``capacity`` of any schedulable node."""
        return self._max_capacity_view

    @property
    def gpu_buckets(self) -> Mapping[int, AbstractSet[int]]:
        """Free GPUs -> indices of the schedulable nodes with that many free (>= 0)."""
        return self._gpu_buckets_view

    @property
    def gpu_bucket_order(self) -> Mapping[int, Sequence[tuple[str, int]]]:
        """``gpu_buckets`` with each bucket as (node name, index) pairs sorted by name:
        live, read-only (do not mutate the lists)."""
        return self._gpu_order_view

    @property
    def name_ranks(self) -> Sequence[int]:
        """Node index -> its position in name order (recomputed only after a node is
        added or removed): ``min(indices, key=ranks.__getitem__)`` is the first by name
        without comparing strings."""
        if self._name_ranks is None:
            ranks = [0] * len(self._nodes)
            order = sorted(range(len(self._nodes)), key=lambda i: self._nodes[i].name)
            for rank, i in enumerate(order):
                ranks[i] = rank
            self._name_ranks = ranks
        return self._name_ranks
