"""The queue-sort extension point: pending gangs in scheduling order.

Order: priority descending, then creation timestamp ascending, then ``namespace/name``
(siblings of one gang stay together: the queue holds gangs, not pods). Elastic gangs
that are already running and ask to grow go after every other gang: a job waiting for
its minimum comes before any job's scale-out, whatever the priorities.
"""

from __future__ import annotations

from collections.abc import Iterator, KeysView

from ..framework.model import Gang


def queue_key(gang: Gang) -> tuple[bool, int, float, str]:
    """Sort key: grows last, then priority desc, creation time asc, ``namespace/name``."""
    return (gang.grows, -gang.priority, gang.creation_timestamp, gang.key)


class GangQueue:
    """Pending gangs by key; ``ordered()`` is the scheduling order."""

    def __init__(self) -> None:
        self._gangs: dict[str, Gang] = {}
        # The order, kept until the next add or remove (gangs are immutable): a
        # saturated queue is ordered once per change, not once per cycle and reader.
        self._order: list[Gang] | None = None

    def add(self, gang: Gang) -> None:
        self._gangs[gang.key] = gang
        self._order = None

    def remove(self, key: str) -> Gang | None:
        gang = self._gangs.pop(key, None)
        if gang is not None:
            self._order = None
        return gang

    def keys(self) -> KeysView[str]:
        return self._gangs.keys()

    def get(self, key: str) -> Gang | None:
        return self._gangs.get(key)

    def __contains__(self, key: object) -> bool:
        return key in self._gangs

    def __len__(self) -> int:
        return len(self._gangs)

    def __iter__(self) -> Iterator[Gang]:
        return iter(self.ordered())

    def ordered(self) -> list[Gang]:
        """A new list (the caller may change it); sorted only after a change."""
        if self._order is None:
            self._order = sorted(self._gangs.values(), key=queue_key)
        return list(self._order)
