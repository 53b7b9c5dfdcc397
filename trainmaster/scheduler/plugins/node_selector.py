"""Filter: rejects nodes whose labels do not match ``pod.node_selector``."""

from __future__ import annotations

from collections.abc import Hashable, Mapping
from collections.abc import Set as AbstractSet
from typing import ClassVar

from ..framework.indexing import outside_all
from ..framework.interface import NodeIndex
from ..framework.model import NodeInfo, PodRequest
from ..framework.status import SUCCESS, Code, Status


def matches_node_selector(selector: Mapping[str, str], labels: Mapping[str, str]) -> bool:
    return all(labels.get(k) == v for k, v in selector.items())


class NodeSelector:
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

    def rejected_groups(self, pod: PodRequest, index: NodeIndex) -> list[AbstractSet[int]]:
        return outside_all(index, [index.with_label(k, v) for k, v in pod.node_selector.items()])
