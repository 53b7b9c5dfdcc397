"""Filter: rejects cordoned nodes."""

from __future__ import annotations

from collections.abc import Hashable
from collections.abc import Set as AbstractSet
from typing import ClassVar

from ..framework.interface import CORDONED_REASON, NodeIndex
from ..framework.model import NodeInfo, PodRequest
from ..framework.status import SUCCESS, Code, Status


class NodeUnschedulable:
    NAME: ClassVar[str] = "NodeUnschedulable"
    ERR_REASON: ClassVar[str] = CORDONED_REASON
    STATIC: ClassVar[bool] = True

    def applies(self, pod: PodRequest) -> bool:
        return True

    def cache_key(self, pod: PodRequest) -> Hashable:
        return None  # the node alone decides

    def filter(self, pod: PodRequest, node: NodeInfo) -> Status:
        if node.unschedulable:
            return Status.of(Code.UNSCHEDULABLE_AND_UNRESOLVABLE, self.NAME, self.ERR_REASON)
        return SUCCESS

    def rejected_groups(self, pod: PodRequest, index: NodeIndex) -> list[AbstractSet[int]]:
        return []  # it rejects cordoned nodes only, and the state takes those out first
