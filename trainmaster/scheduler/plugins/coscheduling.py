"""Coscheduling (gang) plugin: pre-filter and permit over the framework's ``GangManager``.

A thin adapter, as in scheduler-plugins: the manager answers ``GangState``; this maps it
to ``Status`` (READY -> SUCCESS, WAIT -> WAIT, NOT_FOUND -> UNSCHEDULABLE_AND_UNRESOLVABLE;
pods without a gang -> SKIP).
"""

from __future__ import annotations

from typing import ClassVar

from ..framework.gangs import GangManager, GangState
from ..framework.model import PodRequest
from ..framework.status import Code, Status


class Coscheduling:
    """Pre-filter + permit plugin over ``GangManager``: READY -> SUCCESS, WAIT -> WAIT,
    NOT_FOUND -> UNSCHEDULABLE_AND_UNRESOLVABLE; pods without a gang -> SKIP."""

    NAME: ClassVar[str] = "Coscheduling"
    ERR_REASON: ClassVar[str] = "gang is incomplete"
    NOT_FOUND_REASON: ClassVar[str] = "gang not found"

    def __init__(self, manager: GangManager) -> None:
        self._manager = manager

    def _map(self, pod: PodRequest, state: GangState) -> Status:
        match state:
            case GangState.READY:
                return Status.success(self.NAME)
            case GangState.WAIT:
                return Status.of(Code.WAIT, self.NAME, f"{self.ERR_REASON}: {pod.gang_key}")
            case GangState.NOT_FOUND:
                return Status.of(
                    Code.UNSCHEDULABLE_AND_UNRESOLVABLE,
                    self.NAME,
                    f"{self.NOT_FOUND_REASON}: {pod.gang_key}",
                )

    def pre_filter(self, pod: PodRequest) -> Status:
        if pod.gang is None:
            return Status(Code.SKIP, (), self.NAME)
        return self._map(pod, self._manager.pre_filter(pod))

    def permit(self, pod: PodRequest, node: str) -> Status:
        if pod.gang is None:
            return Status(Code.SKIP, (), self.NAME)
        return self._map(pod, self._manager.permit(pod))
