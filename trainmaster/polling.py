"""Poll until a condition holds: the one loop for it (API objects, processes, ports), so
that pacing and the timeout message are the same everywhere."""

from __future__ import annotations

import asyncio
import time
from collections.abc import Awaitable, Callable
from typing import TypeVar

T = TypeVar("T")


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
