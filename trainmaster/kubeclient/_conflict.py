"""Read-modify-write until no 409: the one loop for an update guarded by what was read
(polling until a condition holds is ``trainmaster.polling.wait_until``)."""

from __future__ import annotations

from collections.abc import Awaitable, Callable
from typing import TypeVar

from ._errors import ApiError

T = TypeVar("T")

CONFLICT_ATTEMPTS = 5


async def retry_on_conflict(attempt: Callable[[], Awaitable[T]],
                            attempts: int = CONFLICT_ATTEMPTS) -> T:
    """Run ``attempt`` (a fresh read, then a write guarded by what it read) again while
    the write answers 409 because the object changed meanwhile; the last 409 is raised
    when every attempt lost the race."""
    for left in range(attempts - 1, -1, -1):
        try:
            return await attempt()
        except ApiError as err:
            if not err.conflict or not left:
                raise
    raise AssertionError("unreachable: attempts must be >= 1")
