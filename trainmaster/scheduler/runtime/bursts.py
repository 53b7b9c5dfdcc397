"""Fresh bursts of gangs: when chunks of queue order may stand in for one cycle, and the
joint plan that pins such a burst to leaves so that as many gangs as possible fit whole.

Why chunks: a cycle is one synchronous pass, and no bind goes out before it ends. A burst
of hundreds of gangs (a new leader's first cycle, a large submission) would hold every
bind back for the whole pass; chunks of queue order place the same gangs in the same
order, with the binds of each chunk sent before the next is placed.
"""

from __future__ import annotations

import logging
from collections.abc import Sequence

from ..framework.interface import FilterPlugin
from ..framework.model import Gang
from ..placement.plan import batch_of, plan_batch, plannable
from ..state import ClusterState
from .gangs import pinned_gang
from .queue import queue_key
from .records import GangRecords

log = logging.getLogger("trainmaster.scheduler")


def fresh_burst(queued: dict[str, Gang], submitted: set[str],
                records: GangRecords) -> dict[str, Gang] | None:
    """``queued`` if it is a burst that chunks of queue order may place as one cycle
    would: at least two gangs, all fresh (submitted in this step, none failed before, so
    none holds a reservation) and of one priority (none overtakes a more important one)."""
    if len(queued) < 2:
        return None
    if any(k not in submitted or records.get(k).failures for k in queued):
        return None
    return queued if len({g.priority for g in queued.values()}) == 1 else None


def joint_plan(burst: dict[str, Gang], snapshot: ClusterState, levels: Sequence[str],
               filters: Sequence[FilterPlugin]) -> dict[str, Gang] | None:
    """The burst's gangs that a joint plan (``plan_batch``) placed, each pinned to its
    leaf; None when the burst cannot be planned jointly."""
    if not levels:
        return None
    # A gang found partly bound (a restart in the middle of its binds) must finish in
    # its domain; a joint plan of the others does not know the room it still needs
    # there and may fill it (capacity exactly used: the gang then waits forever).
    if any(snapshot.placed_members(k) for k in burst):
        return None
    level = levels[-1]
    batch = sorted(batch_of([g for g in burst.values() if plannable(g, level)]),
                   key=queue_key)
    if len(batch) < 2:
        return None
    plan = plan_batch(snapshot, batch, level, filters)
    log.debug("joint plan for %d fresh gangs: %d pinned, %d left out (exact=%s)",
              len(batch), len(plan.assigned), len(plan.left_out), plan.exact)
    return {
        # A domain's name is its label values joined by "/": the last is the leaf's.
        key: pinned_gang(burst[key], level, domain.rsplit("/", 1)[-1])
        for key, domain in plan.assigned.items()
    }
