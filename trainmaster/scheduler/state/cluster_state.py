"""The cluster state: node specs, per-node usage, per-domain free capacity.

Length: over 500 lines because the pod state machine, node changes and the read API
share every per-node column; the indexes are split out (``aggregates.py``,
``filter_index.py``) as mixins of this one class.

Pod state machine (one entry per pod uid)::

                      assume(pod, node)
      +---------+ ----------------------------> +---------+
      | Initial |                               | Assumed |
      |         | <---------------------------- |         |
      +---------+    forget(uid), remove(uid)   +---------+
        |    ^                                       |
        |    |                                       | confirm(uid),
        |    |                                       | add_bound(pod, node)
        |    |           remove(uid)                 v
        |    +-------------------------------- +-----------+
        +------------------------------------> |   Bound   | ---+ add_bound(pod, node)
                 add_bound(pod, node)          +-----------+ <--+ (moved / updated)

* ``assume`` is the reserve step: the placement core picked a node, the pod's requests are
  charged to it at once so the next gang sees them, before any API call. It refuses to
  overcommit (``OvercommitError``) and refuses pods it already knows.
* ``forget`` undoes ``assume`` (binding failed, permit rejected, gang torn down): the
  resources are released. Only valid in ``Assumed``.
* ``confirm`` records that the bind call succeeded: ``Assumed -> Bound``.
* ``add_bound`` is the informer path: the API says the pod runs on ``node``. From
  ``Initial`` it charges the node (even past allocatable: reality wins); from
  ``Assumed`` it confirms, moving the charge if the node differs.
* ``remove`` is the pod's deletion (or completion): resources are released and the uid
  is forgotten, from ``Assumed`` or ``Bound``.

Every transition updates the node's usage and the free capacity of each enclosing
switch domain in O(levels x resources), so the placement core never re-sums nodes.
Cordoned nodes are not counted in any domain's free capacity.

Read API: by name (``node``, ``free``, ``domains``, ...: copies or read-only views, for
callers at large) and by index (``columns``, ``live_domains``, ``eligibility``,
``gpu_buckets``: live read-only views without copies, for the placement core's inner
loops). Indices are in name order after construction, ``replace_nodes`` and ``copy``
keep or restore that; a node added later takes the next index and a removed node's
index goes to the last node, so callers break ties by name, never by index. An index
stays valid across ``set_node`` of an existing node; ``remove_node`` moves one.

Node changes are O(that node): ``set_node`` takes the node's share out of every
aggregate (domain free and capacity, GPU buckets, largest capacity, the static-filter
indexes) and puts the new share in, and re-asks the cached filter answers for that one
node. The static-filter indexes (nodes per label value, per taint list, cordoned) let
``eligibility`` answer whole groups of nodes with one filter call each.
"""

from __future__ import annotations

import bisect
from collections.abc import Hashable, Iterable, Iterator, Mapping, Sequence
from collections.abc import Set as AbstractSet
from types import MappingProxyType
from typing import Any

from ..framework.interface import FilterPlugin
from ..framework.model import CLUSTER_LEVEL, GPU, NODE_LEVEL, NodeInfo, PodRequest, Taint
from .aggregates import CapacityIndex
from .filter_index import FilterIndex
from .views import (
    Domain,
    DomainView,
    Eligibility,
    HoldingKey,
    LiveDomain,
    NodeColumns,
    OvercommitError,
    PodEntry,
    PodState,
    add_into,
    capacity_of,
    drop_zeros,
    node_name,
)


class ClusterState(CapacityIndex, FilterIndex):
    """Cluster state for placement plus the assume/forget/confirm cache (see module doc).

    ``levels`` names the topology levels from the top down, e.g. ``("spine", "leaf")``;
    each node's ``topology`` path has one entry per level (a shorter path means the node
    is in no domain of the missing lower levels). Domains are identified by their path
    joined with ``/``, e.g. ``"spine-0/leaf-3"``; the single top domain is ``"cluster"``.
    """

    def __init__(self, nodes: Iterable[NodeInfo], levels: Sequence[str] = ()) -> None:
        self._levels = tuple(levels)
        if len(set(self._levels)) != len(self._levels) or {NODE_LEVEL, CLUSTER_LEVEL} & set(
            self._levels
        ):
            raise ValueError(f"bad topology levels {self._levels!r}")
        self._pods: dict[str, PodEntry] = {}
        self._gang_counts: dict[str, int] = {}
        specs = sorted(nodes, key=lambda n: n.name)
        if len({n.name for n in specs}) != len(specs):
            raise ValueError("duplicate node names")
        self._build(specs)

    # --- index ------------------------------------------------------------------------

    def _build(self, specs: list[NodeInfo]) -> None:
        self._node_version = getattr(self, "_node_version", 0) + 1
        self._pod_version = getattr(self, "_pod_version", 0)
        self._memo = ((-1, -1), {})
        self._static_memo = (-1, {})
        """Every index from ``specs`` (index order) and the tracked pods' node indices."""
        self._nodes: list[NodeInfo] = list(specs)
        self._by_name: tuple[NodeInfo, ...] | None = None
        self._name_ranks: list[int] | None = None
        # node_version -> {(rank, totals): domains whose capacity covers totals}
        self._holding: tuple[int, dict[HoldingKey, tuple[LiveDomain, ...]]] = (-1, {})
        self._index: dict[str, int] = {n.name: i for i, n in enumerate(specs)}
        self._alloc: list[Mapping[str, int]] = [n.allocatable for n in specs]
        self._requested: list[dict[str, int]] = [dict(n.requested) for n in specs]
        self._node_pods: list[set[str]] = [set() for _ in specs]
        self._released: set[int] = set()  # see take_released (indices move with a build)
        for uid, entry in self._pods.items():
            add_into(self._requested[entry.node], entry.pod.effective_requests, 1)
            self._node_pods[entry.node].add(uid)
        self._free: list[dict[str, int]] = [
            {r: q - req.get(r, 0) for r, q in alloc.items()}
            for alloc, req in zip(self._alloc, self._requested, strict=True)
        ]
        # Capacity "if every tracked pod left": the base for can-this-ever-fit questions.
        self._capacity: list[dict[str, int]] = [capacity_of(n) for n in specs]
        self._schedulable: list[bool] = [not n.unschedulable for n in specs]
        # Per resource, how many schedulable nodes have each capacity: max_capacity in
        # O(that node) per node change (a rescan only when the last largest one goes).
        self._capacity_counts: dict[str, dict[int, int]] = {}
        self._max_capacity: dict[str, int] = {}
        # Schedulable nodes bucketed by free GPUs: best-fit single-node lookups skip the scan.
        self._gpu_buckets: dict[int, set[int]] = {}
        # The same buckets as (name, index) lists kept sorted: a by-name walk of a bucket
        # stops at the first fitting node instead of ordering the whole bucket per lookup.
        self._gpu_order: dict[int, list[tuple[str, int]]] = {}
        # Inverted indexes for the static filters (see eligibility): whole sets of nodes
        # per label value, per taint list, cordoned.
        self._all: set[int] = set(range(len(specs)))
        self._cordoned: set[int] = set()
        self._labels: dict[str, dict[str, set[int]]] = {}
        self._taints: dict[tuple[Taint, ...], set[int]] = {}
        # ranks: 0 = node, 1 = lowest level (leaf) ... depth = top level, depth + 1 = cluster
        self._domains: list[list[Domain]] = [[] for _ in range(len(self._levels) + 2)]
        self._domain_by_path: list[dict[tuple[str, ...], Domain]] = [
            {} for _ in range(len(self._levels) + 2)
        ]
        self._ancestors: list[list[Domain]] = [[] for _ in specs]
        for i, node in enumerate(specs):
            self._check_path(node)
            self._index_static(i, node, 1)
        by_rank: list[dict[tuple[str, ...], list[int]]] = [{} for _ in self._domains]
        for i, node in enumerate(specs):
            for rank, path in self._paths(node.topology):
                by_rank[rank].setdefault(path, []).append(i)
        for rank in range(1, len(self._domains)):
            level = self.level_names[rank]
            for path, members in sorted(by_rank[rank].items()):
                dom = Domain(level, rank, "/".join(path) or CLUSTER_LEVEL, tuple(members), path)
                self._domains[rank].append(dom)
                self._domain_by_path[rank][path] = dom
                for i in members:
                    self._ancestors[i].append(dom)
        for i in range(len(specs)):
            self._account(i, 1)
        self._eligibility: dict[object, Eligibility] = {}
        # full key -> (pod, active filters): how to answer for one changed node
        self._eligibility_inputs: dict[object, tuple[PodRequest, list[FilterPlugin]]] = {}
        # id(pod) -> (pod, filters, key): the entry holds both, so neither id is reused
        # while it exists; pods are immutable, so a key never goes stale.
        self._pod_keys: dict[int, tuple[PodRequest, Sequence[FilterPlugin], Hashable]] = {}
        self._columns = NodeColumns(
            self._nodes,
            self._alloc,
            self._requested,
            self._free,
            self._capacity,
            self._schedulable,
        )
        self._max_capacity_view = MappingProxyType(self._max_capacity)
        self._gpu_buckets_view: Mapping[int, AbstractSet[int]] = MappingProxyType(
            self._gpu_buckets
        )
        self._gpu_order_view: Mapping[int, Sequence[tuple[str, int]]] = MappingProxyType(
            self._gpu_order
        )

    def _check_path(self, node: NodeInfo) -> None:
        if len(node.topology) > len(self._levels):
            raise ValueError(
                f"node {node.name}: topology {node.topology!r} deeper than {self._levels}"
            )

    @property
    def columns(self) -> NodeColumns:
        """Per-node state by index (see ``NodeColumns``)."""
        return self._columns

    @property
    def node_index_map(self) -> Mapping[str, int]:
        """Node name -> index, live and read-only."""
        return MappingProxyType(self._index)

    def indices(self, names: Iterable[str]) -> list[int]:
        """Indices of the named nodes the snapshot knows (unknown names are skipped)."""
        index = self._index
        return [index[n] for n in names if n in index]

    # --- read API by name ---------------------------------------------------------------

    @property
    def levels(self) -> tuple[str, ...]:
        """Topology level names, top level first (e.g. ``("spine", "leaf")``)."""
        return self._levels

    def rank(self, level: str) -> int:
        """0 for ``"node"`` up to ``len(levels) + 1`` for ``"cluster"``."""
        try:
            return self.level_names.index(level)
        except ValueError:
            raise ValueError(f"unknown topology level {level!r}; have {self.level_names}") from None

    @property
    def nodes(self) -> tuple[NodeInfo, ...]:
        """Every node, by name (sorted once per node added or removed)."""
        if self._by_name is None:
            self._by_name = tuple(sorted(self._nodes, key=lambda n: n.name))
        return self._by_name

    def node(self, name: str) -> NodeInfo:
        return self._nodes[self._index[name]]

    def requested(self, node: str) -> Mapping[str, int]:
        """Everything charged to ``node``: untracked usage plus assumed and bound pods."""
        return MappingProxyType(self._requested[self._index[node]])

    def free(self, node: str) -> Mapping[str, int]:
        """``allocatable - requested`` per allocatable resource (negative if overcommitted
        by pods observed through ``add_bound``)."""
        return MappingProxyType(self._free[self._index[node]])

    def domains(self, level: str) -> tuple[DomainView, ...]:
        rank = self.rank(level)
        if rank == 0:
            views = []
            for n in self.nodes:
                i = self._index[n.name]
                ok = self._schedulable[i]
                views.append(DomainView(
                    NODE_LEVEL,
                    n.name,
                    (n.name,),
                    MappingProxyType(self._positive(self._free[i]) if ok else {}),
                    MappingProxyType(self._capacity[i] if ok else {}),
                ))
            return tuple(views)
        return tuple(self._view(d) for d in self._domains[rank])

    def _view(self, dom: Domain) -> DomainView:
        return DomainView(
            dom.level,
            dom.name,
            tuple(sorted(self._nodes[i].name for i in dom.nodes)),
            MappingProxyType(dict(dom.free)),
            MappingProxyType(dict(dom.capacity)),
        )

    def ancestors(self, i: int) -> Sequence[LiveDomain]:
        """The live domains node ``i`` is in (cordoned or not), lowest level first up to
        the cluster. Read-only."""
        return self._ancestors[i]

    def domain_of(self, node: str, level: str) -> str | None:
        """Name of the domain at ``level`` containing ``node`` (None if its path is short)."""
        rank = self.rank(level)
        if rank == 0:
            return node
        for dom in self._ancestors[self._index[node]]:
            if dom.rank == rank:
                return dom.name
        return None

    def pod_state(self, uid: str) -> PodState | None:
        entry = self._pods.get(uid)
        return None if entry is None else entry.state

    def pod_node(self, uid: str) -> str | None:
        entry = self._pods.get(uid)
        return None if entry is None else self._nodes[entry.node].name

    def pods(self) -> Iterator[tuple[PodRequest, str, PodState]]:
        for entry in self._pods.values():
            yield entry.pod, self._nodes[entry.node].name, entry.state

    def placed_members(self, gang_key: str) -> int:
        """Pods of the gang currently ``Assumed`` or ``Bound``."""
        return self._gang_counts.get(gang_key, 0)

    def take_released(self) -> set[int]:
        """Indices of the nodes that released resources (a pod removed or forgotten)
        since the last call, and forget them: the scheduler's retry index wakes only the
        gangs such a release can help. Valid for the current ``node_version`` only."""
        released, self._released = self._released, set()
        return released

    def has_released(self) -> bool:
        return bool(self._released)

    # --- state machine ----------------------------------------------------------------

    def _node_index(self, node: str) -> int:
        try:
            return self._index[node]
        except KeyError:
            raise KeyError(f"unknown node {node!r}") from None

    def _track(self, pod: PodRequest, i: int, state: PodState) -> None:
        self._pods[pod.uid] = PodEntry(pod, i, state)
        self._node_pods[i].add(pod.uid)
        self._charge(i, pod.effective_requests, 1)
        gang = pod.gang_key
        if gang is not None:
            self._gang_counts[gang] = self._gang_counts.get(gang, 0) + 1

    def _untrack(self, uid: str) -> PodEntry:
        entry = self._pods.pop(uid)
        self._released.add(entry.node)
        self._node_pods[entry.node].discard(uid)
        self._charge(entry.node, entry.pod.effective_requests, -1)
        gang = entry.pod.gang_key
        if gang is not None:
            left = self._gang_counts[gang] - 1
            if left:
                self._gang_counts[gang] = left
            else:
                del self._gang_counts[gang]
        return entry

    def assume(self, pod: PodRequest, node: str) -> None:
        """Initial -> Assumed: charge ``pod`` to ``node``. Raises ``OvercommitError`` if any
        resource would exceed allocatable, ``ValueError`` if the uid is already known."""
        if pod.uid in self._pods:
            raise ValueError(f"pod {pod.key} ({pod.uid}) is already {self._pods[pod.uid].state}")
        i = self._node_index(node)
        free = self._free[i]
        for resource, qty in pod.effective_requests.items():
            if free.get(resource, 0) < qty:
                raise OvercommitError(
                    f"pod {pod.key} needs {qty} {resource} on {node}, "
                    f"{max(free.get(resource, 0), 0)} free"
                )
        self._track(pod, i, PodState.ASSUMED)

    def forget(self, uid: str) -> None:
        """Assumed -> Initial: release an assumed pod's resources."""
        entry = self._pods.get(uid)
        if entry is None or entry.state is not PodState.ASSUMED:
            raise ValueError(f"forget({uid!r}): pod is {entry.state if entry else 'unknown'}")
        self._untrack(uid)

    def confirm(self, uid: str) -> None:
        """Assumed -> Bound: the bind call succeeded."""
        entry = self._pods.get(uid)
        if entry is None or entry.state is not PodState.ASSUMED:
            raise ValueError(f"confirm({uid!r}): pod is {entry.state if entry else 'unknown'}")
        entry.state = PodState.BOUND

    def add_bound(self, pod: PodRequest, node: str) -> None:
        """Any -> Bound: the API reports ``pod`` running on ``node`` (informer add/update)."""
        i = self._node_index(node)
        entry = self._pods.get(pod.uid)
        if entry is not None:
            if entry.node == i and entry.pod.effective_requests == pod.effective_requests:
                entry.state = PodState.BOUND
                entry.pod = pod
                return
            self._untrack(pod.uid)
        self._track(pod, i, PodState.BOUND)

    def remove(self, uid: str) -> None:
        """Assumed/Bound -> Initial: the pod was deleted or finished."""
        if uid not in self._pods:
            raise KeyError(f"remove({uid!r}): unknown pod")
        self._untrack(uid)

    # --- node changes -----------------------------------------------------------------

    def replace_nodes(self, nodes: Iterable[NodeInfo]) -> None:
        """``set_node`` for many nodes in one rebuild: ``nodes`` is the whole new node set.
        Every tracked pod's node must be in it."""
        specs = sorted(nodes, key=lambda n: n.name)
        if len({n.name for n in specs}) != len(specs):
            raise ValueError("duplicate node names")
        self._rebuild(specs)

    def set_node(self, node: NodeInfo) -> None:
        """Add a node or replace its spec (cordon, labels, taints, allocatable, topology).
        Pods on it stay. O(that node): its share of every aggregate is taken away and
        added back; a new node takes the next index."""
        self._check_path(node)
        i = self._index.get(node.name)
        if i is None:
            self._add_node(node)
            return
        old = self._nodes[i]
        if old == node:
            return
        self._node_version += 1
        self._account(i, -1)
        self._index_static(i, old, -1)
        if old.topology != node.topology:
            self._leave(i)
            self._join(i, node)
        self._nodes[i] = node
        if self._by_name is not None:  # same names, same order: swap the one entry
            k = bisect.bisect_left(self._by_name, node.name, key=node_name)
            self._by_name = (*self._by_name[:k], node, *self._by_name[k + 1 :])
        self._alloc[i] = node.allocatable
        requested = self._requested[i]
        add_into(requested, old.requested, -1)
        add_into(requested, node.requested, 1)
        drop_zeros(requested, old.requested)
        self._free[i] = {r: q - requested.get(r, 0) for r, q in node.allocatable.items()}
        self._capacity[i] = capacity_of(node)
        self._schedulable[i] = not node.unschedulable
        self._index_static(i, node, 1)
        self._account(i, 1)
        self._answer_for(i)

    def _add_node(self, node: NodeInfo) -> None:
        i = len(self._nodes)
        self._nodes.append(node)
        self._by_name = None
        self._name_ranks = None
        self._node_version += 1
        self._index[node.name] = i
        self._alloc.append(node.allocatable)
        self._requested.append(dict(node.requested))
        self._node_pods.append(set())
        self._free.append({r: q - node.requested.get(r, 0) for r, q in node.allocatable.items()})
        self._capacity.append(capacity_of(node))
        self._schedulable.append(not node.unschedulable)
        self._ancestors.append([])
        self._all.add(i)
        self._index_static(i, node, 1)
        self._join(i, node)
        self._account(i, 1)
        self._answer_for(i)

    def remove_node(self, name: str) -> None:
        """Forget a node no tracked pod is on (``ValueError`` otherwise), in O(that node):
        the last node takes its index, so indices of other nodes stay valid."""
        i = self._node_index(name)
        if self._node_pods[i]:
            raise ValueError(
                f"node {name} still has {len(self._node_pods[i])} tracked pod(s); "
                "remove them first"
            )
        node = self._nodes[i]
        self._account(i, -1)
        self._index_static(i, node, -1)
        self._leave(i)
        last = len(self._nodes) - 1
        if i != last:
            self._move(last, i)
        for column in self._per_node():
            column.pop()
        self._all.discard(last)
        del self._index[name]
        self._node_version += 1
        self._by_name = None
        self._name_ranks = None
        for full_key, elig in self._eligibility.items():
            mask, reasons = elig.mask, elig.reasons
            if i != last:
                mask = mask[:i] + mask[last:] + mask[i + 1 : last]
                reasons = (*reasons[:i], reasons[last], *reasons[i + 1 : last])
            else:
                mask, reasons = mask[:last], reasons[:last]
            self._eligibility[full_key] = Eligibility(mask, reasons)

    def _per_node(self) -> tuple[list[Any], ...]:
        """Every list indexed by node."""
        return (self._nodes, self._alloc, self._requested, self._node_pods, self._free,
                self._capacity, self._schedulable, self._ancestors)

    def _move(self, src: int, dst: int) -> None:
        """Give node ``src`` the index ``dst`` (free: its old node is gone)."""
        node = self._nodes[src]
        for column in self._per_node():
            column[dst] = column[src]
        self._index[node.name] = dst
        for uid in self._node_pods[src]:
            self._pods[uid].node = dst
        for dom in self._ancestors[src]:
            at = dom.nodes.index(src)
            dom.nodes = (*dom.nodes[:at], dst, *dom.nodes[at + 1 :])
        groups: list[set[int]] = [self._taints[node.taints]]
        if node.unschedulable:
            groups.append(self._cordoned)
        groups.extend(self._labels[k][v] for k, v in node.labels.items())
        if self._schedulable[src]:
            gpus = max(self._free[src].get(GPU, 0), 0)
            groups.append(self._gpu_buckets[gpus])
            row = self._gpu_order[gpus]
            del row[bisect.bisect_left(row, (node.name, src))]
            bisect.insort(row, (node.name, dst))
        for group in groups:
            group.discard(src)
            group.add(dst)

    def _rebuild(self, specs: list[NodeInfo]) -> None:
        names = [self._nodes[e.node].name for e in self._pods.values()]
        index = {n.name: i for i, n in enumerate(specs)}
        for entry, name in zip(self._pods.values(), names, strict=True):
            entry.node = index[name]
        self._build(specs)

    def copy(self) -> ClusterState:
        """An independent snapshot with the same nodes and pods (for what-if runs)."""
        clone = ClusterState.__new__(ClusterState)
        clone._levels = self._levels
        clone._pods = {u: PodEntry(e.pod, e.node, e.state) for u, e in self._pods.items()}
        clone._gang_counts = dict(self._gang_counts)
        clone._build(list(self._nodes))
        return clone
