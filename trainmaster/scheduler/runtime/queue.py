"""The queue-sort extension point: pending gangs in scheduling order.

Order: priority descending, then creation timestamp ascending, then ``namespace/name``
(siblings of one gang stay together: the queue holds gangs, not pods). Elastic gangs
that are already running and ask to grow go after every other gang: a job waiting for
its minimum comes before any job's scale-out, whatever the priorities.
"""

from __future__ import annotations

from collections.abc import Iterator

from ..framework.model import Gang


def queue_key(gang: Gang) -> tuple[bool, int, float, str]:
    """Sort key: grows last, then priority desc, creation time asc, ``namespace/name``."""
    return (gang.grows, -gang.priority, gang.creation_timestamp, gang.key)


class GangQueue:
    """Pending gangs by key; ``ordered()`` is the scheduling order."""

    def __init__(self) -> None:
        self._gangs: dict[str, Gang] = {}

    def add(self, gang: Gang) -> None:
        self._gangs[gang.key] = gang

    def remove(self, key: str) -> Gang | None:
        return self._gangs.pop(key, None)

    def __contains__(self, key: object) -> bool:
        return key in self._gangs

    def __len__(self) -> int:
        return len(self._gangs)

    def __iter__(self) -> Iterator[Gang]:
        return iter(self.ordered())

    def ordered(self) -> list[Gang]:
        return sorted(self._gangs.values(), key=queue_key)
