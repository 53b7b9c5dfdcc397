"""A new leader learns the old leader's last binds from one list before its first cycle.

Why: a standby's pod watch can lag seconds behind a burst of binds. At 5,000 nodes the
API server was still fanning out the old leader's last ~1,300 binds when the Lease
changed hands; a first cycle on that view re-placed 34 gangs that were bound already,
and their ~500 Bindings (each refused 409) held the first real bind back 4.5 s. Waiting
for the watch to deliver them was tried and was no faster: the watch's lag is the wait.

How: one consistent list (no ``resourceVersion``: served at the API's current revision,
from the API server's watch cache) of the pods of this schedulerName that are bound.
Each one the snapshot does not hold yet is applied as the update the watch will
deliver later: it leaves the pending set and its node is charged, so the first cycle
neither places it again nor places another gang on the GPUs it took. The watch's own
event for it later finds the pod bound on that node and changes nothing
(``ClusterCache.on_pod``/``skip_pod_event``). Pods deleted meanwhile are left to the
watch: a bind of one is refused 404 and costs nothing else.
"""

from __future__ import annotations

import logging
import time
from collections.abc import Callable

from trainmaster.kubeclient import MODIFIED, Kube, pod_path

from .cache import UNFINISHED_PODS, ClusterCache

log = logging.getLogger("trainmaster.scheduler")


def bound_selector(scheduler_name: str) -> str:
    """Field selector of our pods that are bound and not finished."""
    return f"spec.schedulerName={scheduler_name},spec.nodeName!=,{UNFINISHED_PODS}"


async def catch_up(api: Kube, cache: ClusterCache, scheduler_name: str, *,
                   clock: Callable[[], float] = time.monotonic) -> list[str]:
    """Apply the bound pods the snapshot does not know yet; return their uids."""
    started = clock()
    items = await api.list(pod_path(), params={"fieldSelector": bound_selector(scheduler_name)})
    snapshot = cache.snapshot
    unseen = []
    for item in items:
        uid = str(item["metadata"]["uid"])
        if snapshot.pod_state(uid) is None:
            cache.on_pod(MODIFIED, item)
            unseen.append(uid)
    log.info("caught up: %d of %d bound pods were not yet seen by the watch, listed and "
             "applied in %.2fs", len(unseen), len(items), clock() - started)
    return unseen
