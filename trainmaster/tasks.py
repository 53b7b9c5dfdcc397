"""Stopping tasks for certain.

Why: on Python 3.11 ``asyncio.wait_for`` swallows a cancellation that arrives in the
same loop turn as its inner future finishing (it returns the result instead of raising;
fixed in 3.12). A task cancelled once at that moment goes on running, and whoever awaits
it waits forever: exactly the hang of a scheduler that lost its lease while a bind ended
(the report writers woke from their wait for "no bind in flight" as they were cancelled).
So cancel again until the task is done, and never wait unboundedly.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
from collections.abc import Iterable
from typing import Any

log = logging.getLogger("trainmaster.tasks")


async def cancel_all(tasks: Iterable[asyncio.Future[Any]],
                     timeout: float = 10.0, every: float = 0.2) -> bool:
    """Cancel ``tasks`` and wait for them, cancelling again every ``every`` seconds (a
    swallowed cancellation is retried); give up after ``timeout``. True if all ended."""
    tasks = list(tasks)
    pending = {t for t in tasks if not t.done()}
    loop = asyncio.get_running_loop()
    deadline = loop.time() + timeout
    while pending:
        for task in pending:
            task.cancel()
        left = deadline - loop.time()
        if left <= 0:
            log.warning("%d tasks did not stop: %s", len(pending),
                        ", ".join(sorted(getattr(t, "get_name", lambda: "?")()
                                         for t in pending)))
            return False
        _, pending = await asyncio.wait(pending, timeout=min(every, left))
    for task in tasks:
        if task.done() and not task.cancelled():
            with contextlib.suppress(Exception):
                task.exception()  # retrieved: no "exception never retrieved" noise
    return True
