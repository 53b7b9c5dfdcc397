"""The cluster state's static-filter indexes and its cache of filter answers.

Inverted indexes (nodes per label value, per taint list, cordoned) let ``eligibility``
answer whole groups of nodes with one filter call each: a filter that can say which
groups it may reject declares it (``IndexedFilter.rejected_groups``); any other filter
is asked node by node. Answers are cached per (filters, pod key) until a node changes;
a node change re-asks the cached answers for that node only (``_answer_for``).
A mixin of ``ClusterState`` (``cluster_state.py``), which owns the node columns.
"""

from __future__ import annotations

from collections.abc import Hashable, Mapping, Sequence
from collections.abc import Set as AbstractSet
from typing import cast

from ..framework.interface import CORDONED_REASON, FilterPlugin, IndexedFilter, filter_key
from ..framework.model import NodeInfo, NodeSelectorRequirement, PodRequest, SelectorOperator, Taint
from ..framework.status import Code
from .views import ELIGIBILITY_CACHE_SIZE, POD_KEY_MEMO_SIZE, Eligibility

_EMPTY: frozenset[int] = frozenset()


def rejection(plugin: FilterPlugin, pod: PodRequest, node: NodeInfo) -> str | None:
    """Why ``plugin`` rejects ``node`` for ``pod`` (as ``Eligibility.reasons`` says it),
    or None if it passes."""
    status = plugin.filter(pod, node)
    if status.is_success():
        return None
    return status.message if status.code != Code.ERROR else "error"



_INDEXED: dict[type, bool] = {}
"""Per filter class: answered from the indexes? (A runtime-checkable protocol's
isinstance costs tens of microseconds; a class's answer never changes.)"""


def _indexed(plugin: FilterPlugin) -> IndexedFilter | None:
    """``plugin`` if the state may answer it from the indexes: it declares
    ``rejected_groups`` in the very class that defines its ``filter`` (a subclass that
    overrides ``filter`` may read more of the node than the groups account for)."""
    kind = type(plugin)
    known = _INDEXED.get(kind)
    if known is None:
        known = False
        if isinstance(plugin, IndexedFilter):
            for klass in kind.__mro__:
                if "filter" in vars(klass):
                    known = "rejected_groups" in vars(klass)
                    break
        _INDEXED[kind] = known
    return cast(IndexedFilter, plugin) if known else None


class FilterIndex:
    """Static-filter indexes and cached answers (see the module doc)."""

    _nodes: list[NodeInfo]
    _all: set[int]
    _cordoned: set[int]
    _labels: dict[str, dict[str, set[int]]]
    _taints: dict[tuple[Taint, ...], set[int]]
    _eligibility: dict[object, Eligibility]
    _eligibility_inputs: dict[object, tuple[PodRequest, list[FilterPlugin]]]
    _pod_keys: dict[int, tuple[PodRequest, Sequence[FilterPlugin], Hashable]]

    # --- NodeIndex (what an IndexedFilter reads) ------------------------------------

    @property
    def all_nodes(self) -> AbstractSet[int]:
        return self._all

    @property
    def taint_groups(self) -> Mapping[tuple[Taint, ...], AbstractSet[int]]:
        return self._taints

    def with_label(self, key: str, value: str) -> AbstractSet[int]:
        return self._labels.get(key, {}).get(value, _EMPTY)

    def _index_static(self, i: int, node: NodeInfo, sign: int) -> None:
        """Add (``sign`` 1) or drop (-1) node ``i`` in the static-filter indexes."""
        groups = [self._taints.setdefault(node.taints, set())]
        if node.unschedulable:
            groups.append(self._cordoned)
        for key, value in node.labels.items():
            groups.append(self._labels.setdefault(key, {}).setdefault(value, set()))
        for group in groups:
            if sign > 0:
                group.add(i)
            else:
                group.discard(i)
        if sign < 0:  # drop emptied groups: the indexes hold only what nodes have
            if not self._taints[node.taints]:
                del self._taints[node.taints]
            for key, value in node.labels.items():
                values = self._labels[key]
                if not values[value]:
                    del values[value]
                    if not values:
                        del self._labels[key]

    def eligibility(
        self, pod: PodRequest, filters: Sequence[FilterPlugin], key: Hashable | None = None
    ) -> Eligibility:
        """Static ``filters`` for ``pod`` on every node, cached per filter key; a node
        change re-asks the cached answers for that node only (a new ``Eligibility``
        object). ``key`` is ``pod_key(pod, filters)`` if the caller has it."""
        if key is None:
            key = self.pod_key(pod, filters)
        full_key = (tuple(f.NAME for f in filters), key)
        cached = self._eligibility.get(full_key)
        if cached is not None:
            return cached
        if len(self._eligibility) >= ELIGIBILITY_CACHE_SIZE:
            self._eligibility.clear()  # many distinct pod keys: start over
            self._eligibility_inputs.clear()
        active = [f for f in filters if f.applies(pod)]
        n = len(self._nodes)
        reasons: list[str | None] = [None] * n
        failed = set(self._cordoned)  # cordoned nodes are out whatever the filters say
        for i in failed:
            reasons[i] = CORDONED_REASON
        nodes = self._nodes
        for plugin in active:
            groups = self._rejected_groups(plugin, pod)
            if groups is None:  # a filter the indexes know nothing of: node by node
                for i, node in enumerate(nodes):
                    if i not in failed:
                        reason = rejection(plugin, pod, node)
                        if reason is not None:
                            reasons[i] = reason
                            failed.add(i)
                continue
            for group in groups:
                if not group:
                    continue
                # Every node of a group gets the same answer: ask any one of them.
                reason = rejection(plugin, pod, nodes[next(iter(group))])
                if reason is None:
                    continue
                new = group - failed
                for i in new:
                    reasons[i] = reason
                failed |= new
        mask = bytearray(b"\x01") * n
        for i in failed:
            mask[i] = 0
        result = Eligibility(bytes(mask), tuple(reasons))
        self._eligibility[full_key] = result
        self._eligibility_inputs[full_key] = (pod, active)
        return result

    def _rejected_groups(
        self, plugin: FilterPlugin, pod: PodRequest
    ) -> list[AbstractSet[int]] | None:
        """Sets of nodes on which ``plugin`` answers alike and that hold every node it
        may reject, from the inverted indexes; None for a filter without that capability."""
        indexed = _indexed(plugin)
        return None if indexed is None else indexed.rejected_groups(pod, self)

    def matching(self, req: NodeSelectorRequirement) -> set[int]:
        """Nodes whose labels match one node-affinity requirement."""
        values = self._labels.get(req.key, {})
        match req.operator:
            case SelectorOperator.IN:
                return set().union(*(values[v] for v in req.values if v in values))
            case SelectorOperator.NOT_IN:
                return self._all - set().union(*(values[v] for v in req.values if v in values))
            case SelectorOperator.EXISTS:
                return set().union(*values.values())
            case SelectorOperator.DOES_NOT_EXIST:
                return self._all - set().union(*values.values())

    def _answer_for(self, i: int) -> None:
        """Redo every cached eligibility answer for node ``i`` (changed or new)."""
        node = self._nodes[i]
        n = len(self._nodes)
        for full_key, elig in self._eligibility.items():
            pod, active = self._eligibility_inputs[full_key]
            reason: str | None = None
            if node.unschedulable:
                reason = CORDONED_REASON
            else:
                for plugin in active:
                    reason = rejection(plugin, pod, node)
                    if reason is not None:
                        break
            ok = b"\x00" if reason is not None else b"\x01"
            mask, reasons = elig.mask, elig.reasons
            if len(mask) < n:  # a new node, at the end
                mask, reasons = mask + ok, (*reasons, reason)
            elif mask[i : i + 1] != ok or reasons[i] != reason:
                mask = mask[:i] + ok + mask[i + 1 :]
                reasons = (*reasons[:i], reason, *reasons[i + 1 :])
            else:
                continue
            self._eligibility[full_key] = Eligibility(mask, reasons)

    def pod_key(self, pod: PodRequest, filters: Sequence[FilterPlugin]) -> Hashable:
        """``filter_key(pod, filters)``, remembered per pod object and filter sequence:
        the placement core asks for every member of a gang at every attempt."""
        entry = self._pod_keys.get(id(pod))
        if entry is not None and entry[0] is pod and entry[1] is filters:
            return entry[2]
        if len(self._pod_keys) >= POD_KEY_MEMO_SIZE:
            self._pod_keys.clear()
        key = filter_key(pod, filters)
        self._pod_keys[id(pod)] = (pod, filters, key)
        return key
