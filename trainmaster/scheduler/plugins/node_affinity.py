"""Filter: rejects nodes that fail the pod's required node affinity (one term, every
expression must match)."""

from __future__ import annotations

from collections.abc import Hashable, Iterable, Mapping
from collections.abc import Set as AbstractSet
from typing import ClassVar

from ..framework.indexing import outside_all
from ..framework.interface import NodeIndex
from ..framework.model import NodeInfo, NodeSelectorRequirement, PodRequest, SelectorOperator
from ..framework.status import SUCCESS, Code, Status


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


class NodeAffinity:
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

    def rejected_groups(self, pod: PodRequest, index: NodeIndex) -> list[AbstractSet[int]]:
        return outside_all(index, [index.matching(req) for req in pod.affinity])
