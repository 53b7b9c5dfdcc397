"""Resource fit: no node gets more than its free allocatable (never overcommits).

Not a ``FilterPlugin``: its answer depends on usage. The placement applies the same
arithmetic (``framework/resources.py``) through its capacity accounting; the registry
lists it so a profile may name it."""

from __future__ import annotations

from collections.abc import Mapping
from typing import ClassVar

from ..framework.model import NodeInfo, PodRequest
from ..framework.registry import RESOURCE_FIT
from ..framework.resources import insufficient_resource
from ..framework.status import SUCCESS, Code, Status


class NodeResourcesFit:
    NAME: ClassVar[str] = RESOURCE_FIT
    ERR_REASON: ClassVar[str] = "Insufficient"
    STATIC: ClassVar[bool] = False

    def filter(self, pod: PodRequest, node: NodeInfo, requested: Mapping[str, int]) -> Status:
        free = {r: q - requested.get(r, 0) for r, q in node.allocatable.items()}
        resource = insufficient_resource(pod.effective_requests, free)
        if resource is None:
            return SUCCESS
        return Status.of(Code.UNSCHEDULABLE, self.NAME, f"{self.ERR_REASON} {resource}")
