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


async def wait_event(event: asyncio.Event, timeout: float) -> bool:
    """Wait at most ``timeout`` s for ``event``; True if it is set. Not
    ``asyncio.wait_for(event.wait(), ...)``: on Python 3.11 that returns normally when a
    cancellation arrives just as the event is set (CPython gh-86296), and a loop built on
    it then never ends: an operator's warm-up loop kept a test's stop waiting forever."""
    try:
        async with asyncio.timeout(timeout):
            await event.wait()
    except TimeoutError:
        return event.is_set()
    return True


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
