"""The scheduler's heap and Python's cycle collector.

Why: the cache holds every node and pod of the cluster for the life of the process
(about a million objects at 5,000 nodes and 10,000 pods). Python's full collection walks
all of them each time the heap has grown by a quarter: pauses of 0.1-1.1 s each on a
2-core machine (``trainmaster bench failover`` at 5,000 nodes, with this module's DEBUG
log), during the first list and again in a new leader's first cycles, when allocation is
at its highest. ``freeze`` moves what is alive now out of the collector's sight
(``gc.freeze``, O(1), no collection); later collections see only what came after.
Reference counting still frees frozen objects that are dropped, and the cache's objects
(decoded JSON) hold no reference cycles, so nothing accumulates.
"""

from __future__ import annotations

import contextlib
import gc
import logging
import time
from collections.abc import Iterator
from typing import Any

log = logging.getLogger("trainmaster.scheduler")

SLOW_COLLECTION_SECONDS = 0.05
"""A collection at least this long is logged (DEBUG): pauses of the whole loop."""

_started: list[float] = []


@contextlib.contextmanager
def collector_paused() -> Iterator[None]:
    """No cycle collection while the cache is first filled, then ``freeze`` what it holds.

    Why: the first list grows the heap from nothing to about a million objects, and every
    25% of growth set off a full collection that found nothing to free (decoded JSON has
    no cycles): ten collections, 3.9 s of a 5,000-node start-up on an idle 2-core machine.
    """
    was_enabled = gc.isenabled()
    gc.disable()
    try:
        yield
    finally:
        freeze()
        if was_enabled:
            gc.enable()


def freeze() -> None:
    """Hide every object alive now from later collections (see the module's docstring)."""
    gc.freeze()
    log.debug("heap frozen: %d objects outside the collector", gc.get_freeze_count())


def _timed(phase: str, info: dict[str, Any]) -> None:
    if phase == "start":
        _started.append(time.perf_counter())
        return
    if not _started:
        return
    took = time.perf_counter() - _started.pop()
    if took >= SLOW_COLLECTION_SECONDS:
        log.debug("gc of generation %d took %.0f ms (%d collected)", info["generation"],
                  took * 1000, info["collected"])


def log_slow_collections() -> None:
    """Log every collection that paused the process for ``SLOW_COLLECTION_SECONDS``."""
    if _timed not in gc.callbacks:
        gc.callbacks.append(_timed)
