"""A new leader's first cycle waits for its pod watch to catch up with the old leader.

Why: a standby's pod watch can lag seconds behind a burst of binds (at 5,000 nodes the
old leader's last ~1,200 binds were still on the way when the Lease changed hands). A
first cycle on that view re-places gangs that are bound already (every bind refused
409, the gang held back) and places others on GPUs those binds took.

How, without waiting on a quiet cluster: one consistent list of the pods that are
still unbound and ours says which pods the cache holds as pending wrongly (bound or
deleted since); the watch is bound to deliver a change for each of them, so the leader
waits for exactly those, up to a timeout. None stale (the usual case) means no wait.
"""

from __future__ import annotations

import asyncio
import logging
import time
from collections.abc import Callable

from trainmaster.kubeclient import Kube, pod_path

from .cache import ClusterCache

log = logging.getLogger("trainmaster.scheduler")

CATCH_UP_TIMEOUT = 10.0
"""Seconds a new leader waits at most for its watch before it schedules anyway."""
_POLL = 0.02


def unbound_selector(scheduler_name: str) -> str:
    """Field selector of the pods a cycle may place: ours, unbound, not finished."""
    return (f"spec.schedulerName={scheduler_name},spec.nodeName=,"
            "status.phase!=Succeeded,status.phase!=Failed")


def stale_pending(cache: ClusterCache, unbound: set[str]) -> set[str]:
    """Pods the cache holds as pending that the API no longer has unbound."""
    return {uid for uid in cache.pending if uid not in unbound}


async def catch_up(api: Kube, cache: ClusterCache, scheduler_name: str, *,
                   timeout: float = CATCH_UP_TIMEOUT,
                   clock: Callable[[], float] = time.monotonic) -> set[str]:
    """Wait until no pod the API has bound or deleted is pending in ``cache``, or until
    ``timeout``; return the pods that were stale (empty when the watch was current).

    The list is consistent (no ``resourceVersion``): it reflects every bind the old
    leader got an answer for before it released the Lease.
    """
    started = clock()
    listing = await api.get(pod_path(), {"fieldSelector": unbound_selector(scheduler_name)})
    unbound = {str(item["metadata"]["uid"]) for item in listing.get("items") or ()}
    stale = stale_pending(cache, unbound)
    if not stale:
        log.debug("watch current: %d pods pending, listed in %.2fs", len(unbound),
                  clock() - started)
        return stale
    deadline = started + timeout
    waiting = set(stale)
    while waiting and clock() < deadline:
        await asyncio.sleep(_POLL)
        waiting &= cache.pending.keys()
    log.info("caught up: %d pods the watch still had as pending were bound or deleted; "
             "%d not seen after %.2fs", len(stale), len(waiting), clock() - started)
    return stale
