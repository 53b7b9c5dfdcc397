"""The two loops every API user writes: read-modify-write until no 409, and poll until
a condition holds. One of each, so that attempts, pacing and the timeout message are
the same everywhere."""

from __future__ import annotations

import asyncio
import time
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


class WaitTimeout(TimeoutError):
    """``wait_until`` gave up: the message names what it waited for and the last answer."""


class _Deadline:
    def __init__(self, what: str, timeout: float) -> None:
        self.what, self.timeout = what, timeout
        self.end = time.monotonic() + timeout

    def check(self, last: object) -> None:
        if time.monotonic() >= self.end:
            raise WaitTimeout(f"timed out after {self.timeout:.0f}s waiting for {self.what}"
                              f" (last: {last!r})")


def wait_until(check: Callable[[], T | None], what: str, timeout: float,
               every: float = 0.25) -> T:
    """Call ``check`` every ``every`` seconds until it returns something truthy, and
    return that; ``WaitTimeout`` after ``timeout`` seconds."""
    deadline = _Deadline(what, timeout)
    while not (value := check()):
        deadline.check(value)
        time.sleep(every)
    return value


async def wait_until_async(check: Callable[[], Awaitable[T | None]], what: str,
                           timeout: float, every: float = 0.25) -> T:
    """``wait_until`` for a coroutine ``check``, sleeping without blocking the loop."""
    deadline = _Deadline(what, timeout)
    while not (value := await check()):
        deadline.check(value)
        await asyncio.sleep(every)
    return value
