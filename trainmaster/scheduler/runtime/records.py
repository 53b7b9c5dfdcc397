"""Per-gang bookkeeping of the runtime loop: one record per gang key.

A record lives while any of its fields says something (``idle()`` is False) and is
dropped as soon as none does, so the table never grows with gangs long gone.
"""

from __future__ import annotations

from collections.abc import Iterator
from dataclasses import dataclass

from ..framework.model import Gang
from .gangs import Waiting


@dataclass(slots=True)
class GangRecord:
    queued: Gang | None = None
    """The version submitted to the core's queue (None: not queued)."""
    waiting: Waiting | None = None
    """Why its pods cannot form a gang yet (None: they can)."""
    first_seen: float | None = None
    """When it was first seen pending (for the scheduling latency)."""
    failures: int = 0
    """Consecutive cycles it was not placed (its backoff doubles with each)."""
    retry_at: float | None = None
    """When its backoff is over."""
    held_until: float | None = None
    """Its last bind failed: kept out of the queue until then."""
    bind_failures: int = 0
    """Consecutive failed binds (the hold doubles with each)."""

    def idle(self) -> bool:
        return (self.queued is None and self.waiting is None and self.first_seen is None
                and not self.failures and self.retry_at is None and self.held_until is None
                and not self.bind_failures)


class GangRecords:
    """gang key -> ``GangRecord``, with the views the loop reads."""

    def __init__(self) -> None:
        self._records: dict[str, GangRecord] = {}

    def get(self, key: str) -> GangRecord:
        """The record of ``key``, created empty if there is none (``settle`` drops it
        again if it stays empty)."""
        record = self._records.get(key)
        if record is None:
            record = self._records[key] = GangRecord()
        return record

    def peek(self, key: str) -> GangRecord | None:
        return self._records.get(key)

    def settle(self, key: str) -> None:
        record = self._records.get(key)
        if record is not None and record.idle():
            del self._records[key]

    def queued(self) -> dict[str, Gang]:
        """The gangs in the core's queue, by key."""
        return {k: r.queued for k, r in self._records.items() if r.queued is not None}

    def waiting(self) -> Iterator[str]:
        return (k for k, r in self._records.items() if r.waiting is not None)

    def held(self) -> list[tuple[str, float]]:
        return [(k, r.held_until) for k, r in self._records.items() if r.held_until is not None]

    def next_hold(self) -> float | None:
        """When the earliest bind-failure hold ends."""
        return min((r.held_until for r in self._records.values()
                    if r.held_until is not None), default=None)

    def next_retry(self) -> float | None:
        times = [t for r in self._records.values() for t in (r.retry_at, r.held_until)
                 if t is not None]
        return min(times, default=None)
