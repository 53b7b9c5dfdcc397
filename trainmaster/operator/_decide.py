"""The operator's decision for one job, pure: (spec, status, live gang, node health, now) ->
one Action. The reconciler carries it out; tests drive this table directly."""

from __future__ import annotations

from collections.abc import Mapping
from datetime import datetime

from trainmaster.api import FAILED, INVALID_SPEC, MAX_RESTARTS, NON_RETRYABLE, SUCCEEDED
from trainmaster.operator._elastic import shrink, without_member_preemption
from trainmaster.operator._faults import find_fault, progress_time
from trainmaster.operator._model import (
    BACKOFF_CAP_SECONDS,
    Action,
    Cause,
    Decision,
    Fault,
    GangView,
    JobState,
    NodeHealth,
)
from trainmaster.spec import Job


def backoff_seconds(job: Job, restarts_so_far: int) -> float:
    """backoffSeconds before the first restart, doubling each time, capped at 10 minutes."""
    base = job.restart_policy.backoff_seconds
    if base <= 0:
        return 0.0
    return float(min(base * 2 ** min(restarts_so_far, 20), BACKOFF_CAP_SECONDS))


def decide(
    job: Job,
    state: JobState,
    gang: GangView,
    health: Mapping[str, NodeHealth],
    now: datetime,
) -> Decision:
    if state.phase == SUCCEEDED:
        return Decision(Action.DONE)
    if state.phase == FAILED and state.failure_reason != INVALID_SPEC:
        return Decision(Action.DONE)
    if job.suspend:
        return Decision(Action.SUSPEND)
    if state.suspended and state.started:
        # Before the generation check: the suspend flag's own change is not a spec change.
        resume = state.resume_point or "the start (no checkpoint reported)"
        return Decision(Action.RESTART, Fault(Cause.RESUMED, f"spec.suspend is false again: "
                                              f"resuming from {resume}"), counted=False)
    if not state.started:
        return Decision(Action.START)
    restart_at = state.restart_at
    if restart_at is not None and now < restart_at:
        return Decision(Action.WAIT, wake_after=(restart_at - now).total_seconds())
    if state.gang_generation is not None and state.gang_generation != state.generation:
        change = Fault(Cause.SPEC_CHANGED, f"spec generation {state.gang_generation} -> "
                       f"{state.generation}")
        return Decision(Action.RESTART, change, counted=False)
    gang = without_member_preemption(job, gang, health)
    lost = shrink(job, gang, health)
    if lost is not None:
        # Enough members run on: the launchers already re-rendezvoused without the lost
        # ones; the gang is not restarted.
        return Decision(Action.SHRINK, lost.fault, lost=tuple(p.name for p in lost.pods),
                        sizes=(lost.before, lost.after))
    fault = find_fault(job, state, gang, health, now)
    if fault is not None and fault.cause is Cause.PREEMPTED:
        # Not the job's failure: a new gang from the last checkpoint, at once (it waits
        # in the scheduler's queue), without spending a restart.
        return Decision(Action.RESTART, fault, counted=False)
    if fault is not None:
        if not fault.retryable:
            return Decision(Action.FAIL, fault, reason=NON_RETRYABLE)
        if state.restarts >= job.restart_policy.max_restarts:
            return Decision(Action.FAIL, fault, reason=MAX_RESTARTS)
        return Decision(Action.RESTART, fault, backoff=backoff_seconds(job, state.restarts))
    if gang.job_complete or (gang.pods and gang.count("Succeeded") >= job.nodes):
        return Decision(Action.SUCCEED)
    if job.elastic is not None and gang.count("Succeeded") and not gang.count("Running"):
        # An elastic run ends when its ranks do: members that never joined (still pending)
        # are not waited for.
        return Decision(Action.SUCCEED)
    return Decision(Action.OBSERVE, wake_after=_hang_deadline(job, state, now))


def _hang_deadline(job: Job, state: JobState, now: datetime) -> float | None:
    last = progress_time(state)
    if last is None:
        return None
    left = job.restart_policy.hang_timeout_seconds - (now - last).total_seconds()
    return max(left, 0.0) + 0.5  # just past the deadline, so the next look sees the hang


DRAIN_GRACE_SECONDS = 90.0
"""How long a new attempt's gang waits for the old gang's pods to finish: their grace
period, in which a trainer may write a final checkpoint (preemption victims do)."""


def old_gang_wait(
    gang: GangView,
    health: Mapping[str, NodeHealth],
    restarted_at: datetime | None,
    now: datetime,
    grace: float = DRAIN_GRACE_SECONDS,
) -> float | None:
    """Seconds the new attempt's gang should still wait for the old one to stop, or None
    to create it now. Waited for: pods of other attempts on a node that is not sick and not
    yet Succeeded/Failed (being deleted or not). Pods on a sick node are not: its kubelet
    may never confirm they stopped, so they were force-deleted and nothing can be learnt
    by waiting. The wait is bounded by `grace` from the restart decision."""
    alive = [
        p for p in (*gang.pods, *gang.stale_pods, *gang.draining)
        if p.attempt != gang.attempt and p.node and p.node not in health
        and p.phase not in ("Succeeded", "Failed")
    ]
    if not alive or restarted_at is None:
        return None
    left = grace - (now - restarted_at).total_seconds()
    return left if left > 0 else None

