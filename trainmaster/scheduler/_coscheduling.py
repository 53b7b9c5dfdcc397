"""Coscheduling: a gang manager with its own answers, and the thin plugin mapping them.

Like scheduler-plugins' ``coscheduling``: ``GangManager`` knows nothing about the
framework or the cluster; it is given one function, how many members of a gang are
placed (the snapshot's ``placed_members``).
"""

from __future__ import annotations

import enum
from collections.abc import Callable
from typing import ClassVar

from ._model import Gang, PodRequest
from ._status import Code, Status

PlacedMembers = Callable[[str], int]
"""Gang key -> members currently assumed or bound."""


class GangState(enum.Enum):
    WAIT = "Wait"
    """The gang exists but is not complete: fewer members than ``min_member`` (pre-filter)
    or fewer than ``min_member`` assumed/bound (permit)."""
    READY = "Ready"
    """Enough members exist (pre-filter) / are placed (permit)."""
    NOT_FOUND = "NotFound"
    """The pod names a gang nobody registered."""


class GangManager:
    """Registry of gangs, answering coscheduling questions from placed-member counts."""

    def __init__(self, placed_members: PlacedMembers) -> None:
        self._placed_members = placed_members
        self._gangs: dict[str, Gang] = {}

    def add(self, gang: Gang) -> None:
        """Register or replace (e.g. more members arrived) a gang."""
        self._gangs[gang.key] = gang

    def remove(self, key: str) -> Gang | None:
        return self._gangs.pop(key, None)

    def get(self, key: str) -> Gang | None:
        return self._gangs.get(key)

    def pre_filter(self, pod: PodRequest) -> GangState:
        gang = self._lookup(pod)
        if gang is None:
            return GangState.NOT_FOUND
        return GangState.READY if len(gang.members) >= gang.required_members else GangState.WAIT

    def permit(self, pod: PodRequest) -> GangState:
        gang = self._lookup(pod)
        if gang is None:
            return GangState.NOT_FOUND
        placed = self._placed_members(gang.key)
        return GangState.READY if placed >= gang.required_members else GangState.WAIT

    def _lookup(self, pod: PodRequest) -> Gang | None:
        key = pod.gang_key
        return None if key is None else self._gangs.get(key)


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
