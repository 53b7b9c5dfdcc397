"""Filter: rejects nodes with a ``NoSchedule``/``NoExecute`` taint the pod does not
tolerate (``PreferNoSchedule`` never rejects)."""

from __future__ import annotations

from collections.abc import Hashable, Iterable
from collections.abc import Set as AbstractSet
from typing import ClassVar

from ..framework.interface import NodeIndex
from ..framework.model import NodeInfo, PodRequest, Taint, TaintEffect, Toleration
from ..framework.status import SUCCESS, Code, Status

_HARD_EFFECTS = (TaintEffect.NO_SCHEDULE, TaintEffect.NO_EXECUTE)


def untolerated_taint(taints: Iterable[Taint], tolerations: Iterable[Toleration]) -> Taint | None:
    """The first ``NoSchedule``/``NoExecute`` taint no toleration matches, else None."""
    tols = tuple(tolerations)
    for taint in taints:
        if taint.effect in _HARD_EFFECTS and not any(t.tolerates(taint) for t in tols):
            return taint
    return None


class TaintToleration:
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

    def rejected_groups(self, pod: PodRequest, index: NodeIndex) -> list[AbstractSet[int]]:
        # Nodes with the same taint list answer alike; untainted nodes always pass.
        return [group for taints, group in index.taint_groups.items() if taints]
