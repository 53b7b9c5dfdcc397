"""Filter extension point: pure predicates and the tiny plugins that wrap them.

Each static filter (``FilterPlugin`` in ``_contracts.py``) looks only at the pod spec and
the node spec, never at usage, and names what it reads in the pod (``cache_key``), so the
snapshot evaluates it once per (key, node) per snapshot. ``NodeResourcesFit`` is the one
dynamic filter and no ``FilterPlugin``: the placement core applies the same pure
functions (``fit_count``) through its own capacity accounting.
"""

from __future__ import annotations

from collections.abc import Hashable, Iterable, Mapping, Sequence
from typing import ClassVar

from ._contracts import FilterPlugin
from ._model import (
    NodeInfo,
    NodeSelectorRequirement,
    PodRequest,
    SelectorOperator,
    Taint,
    TaintEffect,
    Toleration,
)
from ._status import SUCCESS, Code, Status

# --- pure functions -------------------------------------------------------------------


def insufficient_resource(requests: Mapping[str, int], free: Mapping[str, int]) -> str | None:
    """The first requested resource (sorted by name) that ``free`` cannot cover, else None."""
    for resource in sorted(requests):
        if free.get(resource, 0) < requests[resource]:
            return resource
    return None


def fit_count(requests: Iterable[tuple[str, int]], free: Mapping[str, int]) -> int:
    """How many pods with ``requests`` (non-zero quantities) fit into ``free`` (>= 0)."""
    best = -1
    for resource, qty in requests:
        n = free.get(resource, 0) // qty
        if n <= 0:
            return 0
        if best < 0 or n < best:
            best = n
    return max(best, 0)


def matches_node_selector(selector: Mapping[str, str], labels: Mapping[str, str]) -> bool:
    return all(labels.get(k) == v for k, v in selector.items())


def matches_requirement(req: NodeSelectorRequirement, labels: Mapping[str, str]) -> bool:
    value = labels.get(req.key)
    match req.operator:
        case SelectorOperator.IN:
            return value is not None and value in req.values
        case SelectorOperator.NOT_IN:
            return value is None or value not in req.values
        case SelectorOperator.EXISTS:
            return value is not None
        case SelectorOperator.DOES_NOT_EXIST:
            return value is None


def matches_affinity(
    requirements: Iterable[NodeSelectorRequirement], labels: Mapping[str, str]
) -> bool:
    """Required node affinity with one term: every expression must match."""
    return all(matches_requirement(r, labels) for r in requirements)


_HARD_EFFECTS = (TaintEffect.NO_SCHEDULE, TaintEffect.NO_EXECUTE)


def untolerated_taint(taints: Iterable[Taint], tolerations: Iterable[Toleration]) -> Taint | None:
    """The first ``NoSchedule``/``NoExecute`` taint no toleration matches, else None.
    ``PreferNoSchedule`` never rejects a node."""
    tols = tuple(tolerations)
    for taint in taints:
        if taint.effect in _HARD_EFFECTS and not any(t.tolerates(taint) for t in tols):
            return taint
    return None


# --- plugins --------------------------------------------------------------------------


class NodeUnschedulable:
    """Rejects cordoned nodes."""

    NAME: ClassVar[str] = "NodeUnschedulable"
    ERR_REASON: ClassVar[str] = "node(s) were unschedulable"
    STATIC: ClassVar[bool] = True

    def applies(self, pod: PodRequest) -> bool:
        return True

    def cache_key(self, pod: PodRequest) -> Hashable:
        return None  # the node alone decides

    def filter(self, pod: PodRequest, node: NodeInfo) -> Status:
        if node.unschedulable:
            return Status.of(Code.UNSCHEDULABLE_AND_UNRESOLVABLE, self.NAME, self.ERR_REASON)
        return SUCCESS


class NodeSelector:
    """Rejects nodes whose labels do not match ``pod.node_selector``."""

    NAME: ClassVar[str] = "NodeSelector"
    ERR_REASON: ClassVar[str] = "node(s) didn't match Pod's node selector"
    STATIC: ClassVar[bool] = True

    def applies(self, pod: PodRequest) -> bool:
        return bool(pod.node_selector)

    def cache_key(self, pod: PodRequest) -> Hashable:
        return frozenset(pod.node_selector.items())

    def filter(self, pod: PodRequest, node: NodeInfo) -> Status:
        if matches_node_selector(pod.node_selector, node.labels):
            return SUCCESS
        return Status.of(Code.UNSCHEDULABLE_AND_UNRESOLVABLE, self.NAME, self.ERR_REASON)


class NodeAffinity:
    """Rejects nodes that fail the pod's required node affinity."""

    NAME: ClassVar[str] = "NodeAffinity"
    ERR_REASON: ClassVar[str] = "node(s) didn't match Pod's node affinity"
    STATIC: ClassVar[bool] = True

    def applies(self, pod: PodRequest) -> bool:
        return bool(pod.affinity)

    def cache_key(self, pod: PodRequest) -> Hashable:
        return pod.affinity

    def filter(self, pod: PodRequest, node: NodeInfo) -> Status:
        if matches_affinity(pod.affinity, node.labels):
            return SUCCESS
        return Status.of(Code.UNSCHEDULABLE_AND_UNRESOLVABLE, self.NAME, self.ERR_REASON)


class TaintToleration:
    """Rejects nodes with a ``NoSchedule``/``NoExecute`` taint the pod does not tolerate."""

    NAME: ClassVar[str] = "TaintToleration"
    ERR_REASON: ClassVar[str] = "node(s) had untolerated taint"
    STATIC: ClassVar[bool] = True

    def applies(self, pod: PodRequest) -> bool:
        return True  # no tolerations still has to check the node's taints

    def cache_key(self, pod: PodRequest) -> Hashable:
        return pod.tolerations

    def filter(self, pod: PodRequest, node: NodeInfo) -> Status:
        taint = untolerated_taint(node.taints, pod.tolerations)
        if taint is None:
            return SUCCESS
        return Status.of(
            Code.UNSCHEDULABLE_AND_UNRESOLVABLE,
            self.NAME,
            f"{self.ERR_REASON} {{{taint.key}: {taint.value}}}",
        )


class NodeResourcesFit:
    """Rejects nodes without enough free allocatable for the pod (never overcommits).

    Not a ``FilterPlugin``: its answer depends on usage. The placement core applies it
    through its capacity accounting; the registry lists it so a profile may name it."""

    NAME: ClassVar[str] = "NodeResourcesFit"
    ERR_REASON: ClassVar[str] = "Insufficient"
    STATIC: ClassVar[bool] = False

    def filter(self, pod: PodRequest, node: NodeInfo, requested: Mapping[str, int]) -> Status:
        free = {r: q - requested.get(r, 0) for r, q in node.allocatable.items()}
        resource = insufficient_resource(pod.effective_requests, free)
        if resource is None:
            return SUCCESS
        return Status.of(Code.UNSCHEDULABLE, self.NAME, f"{self.ERR_REASON} {resource}")


# --- the cache key of a filter set -----------------------------------------------------


def filter_key(pod: PodRequest, filters: Sequence[FilterPlugin]) -> Hashable:
    """Pods with equal keys get the same answer from ``filters`` on every node: each
    filter's own ``cache_key``, in order."""
    return tuple([f.cache_key(pod) for f in filters])

