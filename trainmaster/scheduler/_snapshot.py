"""The scheduler's view of the cluster: node specs, per-node usage, per-domain free capacity.

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
loops). A node's index is its position in name order; every node change renumbers, so
an index is only valid until the next ``set_node``/``replace_nodes``.
"""

from __future__ import annotations

import enum
from collections.abc import Hashable, Iterable, Iterator, Mapping, Sequence
from collections.abc import Set as AbstractSet
from dataclasses import dataclass, field
from types import MappingProxyType
from typing import Protocol

from ._contracts import FilterPlugin
from ._filters import NodeUnschedulable, filter_key
from ._model import CLUSTER_LEVEL, GPU, NODE_LEVEL, NodeInfo, PodRequest
from ._status import Code

_ELIGIBILITY_CACHE_SIZE = 4096
_POD_KEY_MEMO_SIZE = 65536


class PodState(enum.StrEnum):
    ASSUMED = "Assumed"
    BOUND = "Bound"


class OvercommitError(ValueError):
    """``assume`` would push a node's usage of some resource past its allocatable."""


@dataclass(frozen=True, slots=True)
class DomainView:
    """A switch domain (or the cluster) as exposed to callers."""

    level: str
    name: str
    nodes: tuple[str, ...]
    free: Mapping[str, int]
    """Free allocatable summed over the domain's schedulable (uncordoned) nodes."""
    capacity: Mapping[str, int]
    """Allocatable minus untracked usage, summed over schedulable nodes."""


class LiveDomain(Protocol):
    """A switch domain (or the cluster) as the placement core reads it: live (updated by
    every assume/forget), read-only, nodes by index. See ``DomainView`` for a copy."""

    @property
    def level(self) -> str: ...
    @property
    def rank(self) -> int: ...
    @property
    def name(self) -> str: ...
    @property
    def nodes(self) -> tuple[int, ...]: ...
    @property
    def free(self) -> Mapping[str, int]: ...
    @property
    def capacity(self) -> Mapping[str, int]: ...


@dataclass(frozen=True, slots=True)
class NodeColumns:
    """Per-node state by index (see the module doc), read-only and live: ``free[i]`` is
    node i's free allocatable now. Valid until the next node change."""

    nodes: Sequence[NodeInfo]
    allocatable: Sequence[Mapping[str, int]]
    requested: Sequence[Mapping[str, int]]
    """Untracked usage plus assumed and bound pods."""
    free: Sequence[Mapping[str, int]]
    """``allocatable - requested`` (negative if overcommitted through ``add_bound``)."""
    capacity: Sequence[Mapping[str, int]]
    """Free allocatable if every tracked pod left: for can-this-ever-fit questions."""
    schedulable: Sequence[bool]
    """False for cordoned nodes."""


@dataclass(frozen=True, slots=True)
class Eligibility:
    """Static filter result for one pod key: ``mask[i]`` is 1 if node i passes every
    filter, else ``reasons[i]`` says why not."""

    mask: bytes
    reasons: tuple[str | None, ...]


@dataclass(slots=True)
class _Domain:
    level: str
    rank: int
    name: str
    nodes: tuple[int, ...]
    free: dict[str, int] = field(default_factory=dict)
    capacity: dict[str, int] = field(default_factory=dict)


@dataclass(slots=True)
class _PodEntry:
    pod: PodRequest
    node: int
    state: PodState


def _add_into(target: dict[str, int], delta: Mapping[str, int], sign: int) -> None:
    for resource, qty in delta.items():
        target[resource] = target.get(resource, 0) + sign * qty


class ClusterSnapshot:
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
        self._pods: dict[str, _PodEntry] = {}
        self._gang_counts: dict[str, int] = {}
        specs = sorted(nodes, key=lambda n: n.name)
        if len({n.name for n in specs}) != len(specs):
            raise ValueError("duplicate node names")
        self._build(specs)

    # --- index ------------------------------------------------------------------------

    def _build(self, specs: list[NodeInfo]) -> None:
        depth = len(self._levels)
        self._nodes: tuple[NodeInfo, ...] = tuple(specs)
        self._index: dict[str, int] = {n.name: i for i, n in enumerate(specs)}
        self._alloc: list[Mapping[str, int]] = [n.allocatable for n in specs]
        self._requested: list[dict[str, int]] = [dict(n.requested) for n in specs]
        for entry in self._pods.values():
            _add_into(self._requested[entry.node], entry.pod.effective_requests, 1)
        self._free: list[dict[str, int]] = [
            {r: q - req.get(r, 0) for r, q in alloc.items()}
            for alloc, req in zip(self._alloc, self._requested, strict=True)
        ]
        # Capacity "if every tracked pod left": the base for can-this-ever-fit questions.
        self._capacity: list[dict[str, int]] = [
            {r: max(q - n.requested.get(r, 0), 0) for r, q in n.allocatable.items()} for n in specs
        ]
        self._schedulable: list[bool] = [not n.unschedulable for n in specs]
        self._max_capacity: dict[str, int] = {}
        for i, cap in enumerate(self._capacity):
            if self._schedulable[i]:
                for r, q in cap.items():
                    self._max_capacity[r] = max(self._max_capacity.get(r, 0), q)
        # Schedulable nodes bucketed by free GPUs: best-fit single-node lookups skip the scan.
        self._gpu_buckets: dict[int, set[int]] = {}
        for i, free in enumerate(self._free):
            if self._schedulable[i]:
                self._gpu_buckets.setdefault(max(free.get(GPU, 0), 0), set()).add(i)
        # ranks: 0 = node, 1 = lowest level (leaf) ... depth = top level, depth + 1 = cluster
        by_rank: list[dict[tuple[str, ...], list[int]]] = [{} for _ in range(depth + 2)]
        for i, node in enumerate(specs):
            path = node.topology
            if len(path) > depth:
                raise ValueError(f"node {node.name}: topology {path!r} deeper than {self._levels}")
            for rank in range(1, depth + 2):
                prefix_len = depth + 1 - rank
                if len(path) >= prefix_len:
                    by_rank[rank].setdefault(path[:prefix_len], []).append(i)
        self._domains: list[list[_Domain]] = [[]]
        self._ancestors: list[list[_Domain]] = [[] for _ in specs]
        for rank in range(1, depth + 2):
            level = self.level_names[rank]
            row: list[_Domain] = []
            for path, members in sorted(by_rank[rank].items()):
                dom = _Domain(level, rank, "/".join(path) or CLUSTER_LEVEL, tuple(members))
                for i in members:
                    if self._schedulable[i]:
                        _add_into(dom.free, self._positive(self._free[i]), 1)
                        _add_into(dom.capacity, self._capacity[i], 1)
                    self._ancestors[i].append(dom)
                row.append(dom)
            self._domains.append(row)
        self._eligibility: dict[object, Eligibility] = {}
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

    @staticmethod
    def _positive(free: Mapping[str, int]) -> dict[str, int]:
        return {r: q for r, q in free.items() if q > 0}

    def _charge(self, i: int, requests: Mapping[str, int], sign: int) -> None:
        free = self._free[i]
        requested = self._requested[i]
        schedulable = self._schedulable[i]
        ancestors = self._ancestors[i] if schedulable else ()
        for resource, qty in requests.items():
            requested[resource] = requested.get(resource, 0) + sign * qty
            before = free.get(resource, 0)
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

    # --- read API by index (live views, no copies) -------------------------------------

    def eligibility(
        self, pod: PodRequest, filters: Sequence[FilterPlugin], key: Hashable | None = None
    ) -> Eligibility:
        """Static ``filters`` for ``pod`` on every node, cached per filter key until the
        next node change. ``key`` is ``pod_key(pod, filters)`` if the caller has it."""
        if key is None:
            key = self.pod_key(pod, filters)
        full_key = (tuple(f.NAME for f in filters), key)
        cached = self._eligibility.get(full_key)
        if cached is not None:
            return cached
        if len(self._eligibility) >= _ELIGIBILITY_CACHE_SIZE:
            self._eligibility.clear()  # many distinct pod keys: start over
        active = [f for f in filters if f.applies(pod)]
        n = len(self._nodes)
        mask = bytearray(n)
        reasons: list[str | None] = [None] * n
        for i, node in enumerate(self._nodes):
            if not self._schedulable[i]:  # cordoned nodes are out whatever the filters say
                reasons[i] = NodeUnschedulable.ERR_REASON
                continue
            for plugin in active:
                status = plugin.filter(pod, node)
                if not status.is_success():
                    reasons[i] = status.message if status.code != Code.ERROR else "error"
                    break
            else:
                mask[i] = 1
        result = Eligibility(bytes(mask), tuple(reasons))
        self._eligibility[full_key] = result
        return result

    def pod_key(self, pod: PodRequest, filters: Sequence[FilterPlugin]) -> Hashable:
        """``filter_key(pod, filters)``, remembered per pod object and filter sequence:
        the placement core asks for every member of a gang at every attempt."""
        entry = self._pod_keys.get(id(pod))
        if entry is not None and entry[0] is pod and entry[1] is filters:
            return entry[2]
        if len(self._pod_keys) >= _POD_KEY_MEMO_SIZE:
            self._pod_keys.clear()
        key = filter_key(pod, filters)
        self._pod_keys[id(pod)] = (pod, filters, key)
        return key

    @property
    def columns(self) -> NodeColumns:
        """Per-node state by index (see ``NodeColumns``)."""
        return self._columns

    def live_domains(self, rank: int) -> Sequence[LiveDomain]:
        """The domains at ``rank`` (1 = lowest level ... ``len(levels) + 1`` = cluster),
        by name, live. Rank 0 (single nodes) has none (empty): nodes are in ``columns``."""
        if not 0 <= rank < len(self._domains):
            raise ValueError(f"no rank {rank}; ranks 0..{len(self._domains) - 1}")
        return self._domains[rank]

    @property
    def max_capacity(self) -> Mapping[str, int]:
        """Per resource, the largest ``capacity`` of any schedulable node."""
        return self._max_capacity_view

    @property
    def gpu_buckets(self) -> Mapping[int, AbstractSet[int]]:
        """Free GPUs -> indices of the schedulable nodes with that many free (>= 0)."""
        return self._gpu_buckets_view

    def indices(self, names: Iterable[str]) -> list[int]:
        """Indices of the named nodes the snapshot knows (unknown names are skipped)."""
        index = self._index
        return [index[n] for n in names if n in index]

    # --- read API by name ---------------------------------------------------------------

    @property
    def levels(self) -> tuple[str, ...]:
        """Topology level names, top level first (e.g. ``("spine", "leaf")``)."""
        return self._levels

    @property
    def level_names(self) -> tuple[str, ...]:
        """All levels smallest first: ``("node", "leaf", "spine", "cluster")``."""
        return (NODE_LEVEL, *reversed(self._levels), CLUSTER_LEVEL)

    def rank(self, level: str) -> int:
        """0 for ``"node"`` up to ``len(levels) + 1`` for ``"cluster"``."""
        try:
            return self.level_names.index(level)
        except ValueError:
            raise ValueError(f"unknown topology level {level!r}; have {self.level_names}") from None

    @property
    def nodes(self) -> tuple[NodeInfo, ...]:
        """Every node, by name (index order)."""
        return self._nodes

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
            return tuple(
                DomainView(
                    NODE_LEVEL,
                    n.name,
                    (n.name,),
                    MappingProxyType(self._positive(self._free[i]) if self._schedulable[i] else {}),
                    MappingProxyType(self._capacity[i] if self._schedulable[i] else {}),
                )
                for i, n in enumerate(self._nodes)
            )
        return tuple(self._view(d) for d in self._domains[rank])

    def _view(self, dom: _Domain) -> DomainView:
        return DomainView(
            dom.level,
            dom.name,
            tuple(self._nodes[i].name for i in dom.nodes),
            MappingProxyType(dict(dom.free)),
            MappingProxyType(dict(dom.capacity)),
        )

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

    # --- state machine ----------------------------------------------------------------

    def _node_index(self, node: str) -> int:
        try:
            return self._index[node]
        except KeyError:
            raise KeyError(f"unknown node {node!r}") from None

    def _track(self, pod: PodRequest, i: int, state: PodState) -> None:
        self._pods[pod.uid] = _PodEntry(pod, i, state)
        self._charge(i, pod.effective_requests, 1)
        gang = pod.gang_key
        if gang is not None:
            self._gang_counts[gang] = self._gang_counts.get(gang, 0) + 1

    def _untrack(self, uid: str) -> _PodEntry:
        entry = self._pods.pop(uid)
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
        self._rebuild(sorted(nodes, key=lambda n: n.name))

    def set_node(self, node: NodeInfo) -> None:
        """Add a node or replace its spec (cordon, labels, taints). Pods on it stay."""
        specs = list(self._nodes)
        if node.name in self._index:
            specs[self._index[node.name]] = node
            self._rebuild(specs)
        else:
            specs.append(node)
            specs.sort(key=lambda n: n.name)
            self._rebuild(specs)

    def _rebuild(self, specs: list[NodeInfo]) -> None:
        names = [self._nodes[e.node].name for e in self._pods.values()]
        index = {n.name: i for i, n in enumerate(specs)}
        for entry, name in zip(self._pods.values(), names, strict=True):
            entry.node = index[name]
        self._build(specs)

    def copy(self) -> ClusterSnapshot:
        """An independent snapshot with the same nodes and pods (for what-if runs)."""
        clone = ClusterSnapshot.__new__(ClusterSnapshot)
        clone._levels = self._levels
        clone._pods = {u: _PodEntry(e.pod, e.node, e.state) for u, e in self._pods.items()}
        clone._gang_counts = dict(self._gang_counts)
        clone._build(list(self._nodes))
        return clone
