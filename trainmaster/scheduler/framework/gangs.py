"""The gang registry: which gangs exist, and whether one is complete.

Like scheduler-plugins' ``coscheduling`` core: ``GangManager`` knows nothing about the
plugins or the cluster; it is given one function, how many members of a gang are placed
(the cluster state's ``placed_members``). Plugins reach it through the ``Handle``; the
``Coscheduling`` plugin maps its ``GangState`` answers to ``Status``.
"""

from __future__ import annotations

import enum
from collections.abc import Callable

from .model import Gang, PodRequest

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
