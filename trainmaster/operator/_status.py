"""TrainingJob status patches, pure. Each builder returns a JSON merge patch for .status.

Lists (conditions, nodes, restartHistory) are replaced whole by a merge patch, which is
safe because the operator is the only writer of every field here; the launcher writes only
lastHeartbeat and lastCheckpoint, which no builder touches.
"""

from __future__ import annotations

from datetime import datetime, timedelta
from typing import Any

from trainmaster.api import (
    COND_DATASETS_READY,
    COND_FAILED,
    COND_RUNNING,
    COND_SPEC_VALID,
    COND_SUCCEEDED,
    COND_SUSPENDED,
    FAILED,
    INVALID_SPEC,
    MAX_RESTARTS,
    PENDING,
    REASON_COMPLETED,
    REASON_GANG_CREATED,
    REASON_GANG_PENDING,
    REASON_GANG_RUNNING,
    REASON_RESUMED,
    REASON_SUSPENDED,
    REASON_VALID,
    REASON_WAITING_FOR_WARMUP,
    REASON_WARM,
    RESTARTING,
    RUNNING,
    SUCCEEDED,
    SUSPENDED,
    WARMUP_FAILED,
    WARMUP_TIMEOUT,
    format_time,
    parse_time,
)
from trainmaster.objects import gang_name
from trainmaster.operator._elastic import required_pods
from trainmaster.operator._model import HISTORY_LIMIT, Decision, Fault, GangView, JobState
from trainmaster.spec import Job


def set_condition(
    conditions: list[dict[str, Any]],
    kind: str,
    status: bool,
    reason: str,
    message: str,
    now: datetime,
) -> list[dict[str, Any]]:
    """conditions with `kind` set; lastTransitionTime moves only when the status flips."""
    text = "True" if status else "False"
    old = next((c for c in conditions if c.get("type") == kind), None)
    since = old.get("lastTransitionTime") if old and old.get("status") == text else None
    new = {
        "type": kind,
        "status": text,
        "reason": reason,
        "message": message,
        "lastTransitionTime": since or format_time(now),
    }
    return [c for c in conditions if c.get("type") != kind] + [new]


def _fault_record(fault: Fault, attempt: int, now: datetime) -> dict[str, Any]:
    record: dict[str, Any] = {
        "cause": str(fault.cause),
        "message": fault.message,
        "attempt": attempt,
        "time": format_time(now),
    }
    if fault.nodes:
        record["nodes"] = list(fault.nodes)
    if fault.pod:
        record["pod"] = fault.pod
    if fault.exit_code is not None:
        record["exitCode"] = fault.exit_code
    return record


def start_patch(state: JobState, now: datetime, datasets: bool = False) -> dict[str, Any]:
    """Attempt 0, written before gang r0 is created."""
    conds = set_condition(state.conditions, COND_SPEC_VALID, True, REASON_VALID, "", now)
    if datasets or state.condition(COND_DATASETS_READY) is not None:
        conds = set_condition(conds, COND_DATASETS_READY, True, REASON_WARM, "", now)
    conds = set_condition(conds, COND_RUNNING, False, REASON_GANG_CREATED, "", now)
    conds = [c for c in conds if c["type"] != COND_FAILED]
    conds = _resumed(state, conds, now)  # created suspended, started now
    return {
        "phase": PENDING,
        "attempt": 0,
        "restarts": 0,
        "gangGeneration": state.generation,
        "conditions": conds,
    }


def hold_patch(state: JobState, reason: str, now: datetime, failure: str | None = None
               ) -> dict[str, Any]:
    """A job held before its first gang (its datasets are not warm yet): Pending, with the
    reason, and the last warm-up failure of its datasets if there is one (`WarmupFailed`);
    only the fields that changed. No attempt is recorded, so the next look decides to start
    again and checks again."""
    conds = set_condition(state.conditions, COND_SPEC_VALID, True, REASON_VALID, "", now)
    if failure:
        conds = set_condition(conds, COND_DATASETS_READY, False, WARMUP_FAILED,
                              f"{reason}; {failure}", now)
    else:
        conds = set_condition(conds, COND_DATASETS_READY, False, REASON_WAITING_FOR_WARMUP,
                              reason, now)
    wanted = {"phase": PENDING, "pendingReason": reason, "conditions": conds}
    return {k: v for k, v in wanted.items() if state.status.get(k) != v}


def held_since(state: JobState, now: datetime) -> datetime:
    """When the job was first held for its datasets (the hold condition's transition)."""
    cond = state.condition(COND_DATASETS_READY)
    if cond is not None and cond.get("status") == "False":
        since = parse_time(cond.get("lastTransitionTime"))
        if since is not None:
            return since
    return now


def warmup_timeout_patch(state: JobState, message: str, now: datetime) -> dict[str, Any]:
    """A job held for its datasets longer than cache.warmupTimeoutMinutes: it fails, with
    that reason, rather than wait forever."""
    conds = set_condition(state.conditions, COND_DATASETS_READY, False, WARMUP_TIMEOUT,
                          message, now)
    conds = set_condition(conds, COND_FAILED, True, WARMUP_TIMEOUT, message, now)
    return {"phase": FAILED, "pendingReason": None, "conditions": conds}


def restart_patch(state: JobState, decision: Decision, now: datetime) -> dict[str, Any]:
    """Everything a restart changes, in one write made before any side effect: if the
    operator dies after it, the next one carries on with this attempt and this count."""
    assert decision.fault is not None
    attempt = state.attempt + 1
    restarts = state.restarts + (1 if decision.counted else 0)
    resume = state.resume_point
    record = _fault_record(decision.fault, state.attempt, now)
    entry = {**record, "restart": restarts, "newAttempt": attempt, "resumeFrom": resume}
    history = [*list(state.status.get("restartHistory") or [])[-(HISTORY_LIMIT - 1):], entry]
    conds = set_condition(state.conditions, COND_RUNNING, False, str(decision.fault.cause),
                          decision.fault.describe(), now)
    conds = [c for c in conds if c["type"] != COND_FAILED]
    conds = _resumed(state, conds, now)
    patch: dict[str, Any] = {
        "phase": RESTARTING,
        "attempt": attempt,
        "restarts": restarts,
        "resumeFrom": resume,
        "gangGeneration": state.generation,
        "restartAt": format_time(now + timedelta(seconds=decision.backoff))
        if decision.backoff > 0 else None,
        "runningSince": None,
        "nodes": [],
        "pendingReason": f"restart backoff {decision.backoff:.0f}s" if decision.backoff else None,
        "restartHistory": history,
        "conditions": conds,
    }
    if decision.counted:
        patch["lastFailure"] = record
    return patch


def _resumed(state: JobState, conds: list[dict[str, Any]], now: datetime
             ) -> list[dict[str, Any]]:
    """Suspended=False once a suspended job gets a gang again (kept, not dropped: it says
    when the job was resumed)."""
    if not state.suspended:
        return conds
    return set_condition(conds, COND_SUSPENDED, False, REASON_RESUMED,
                         "spec.suspend is false: a new gang is created", now)


def suspend_patch(state: JobState, now: datetime) -> dict[str, Any]:
    """Phase Suspended, written before the gang is removed: only the fields that changed,
    so the passes while suspended write nothing. The message names the checkpoint a
    resume starts from (it moves if the stopping gang reports a last one)."""
    resume = state.resume_point
    message = ("spec.suspend is true: the gang was removed; "
               + (f"a resume starts from the checkpoint {resume}" if resume else
                  "no checkpoint reported: a resume starts from the beginning"))
    conds = set_condition(state.conditions, COND_SUSPENDED, True, REASON_SUSPENDED, message,
                          now)
    conds = set_condition(conds, COND_RUNNING, False, REASON_SUSPENDED, message, now)
    wanted: dict[str, Any] = {
        "phase": SUSPENDED,
        "nodes": [],
        "pendingReason": None,
        "runningSince": None,
        "restartAt": None,
        "conditions": conds,
    }
    return {k: v for k, v in wanted.items() if state.status.get(k) != v}


def resume_patch(state: JobState) -> dict[str, Any]:
    """Move the current attempt's resumeFrom (and its restart record) to the newest
    checkpoint reported since the restart was decided, just before its gang is created;
    nothing when it has not changed."""
    resume = state.resume_point
    if resume == state.resume_from:
        return {}
    history = list(state.status.get("restartHistory") or [])
    if history and isinstance(history[-1], dict) and \
            history[-1].get("newAttempt") == state.attempt:
        history[-1] = {**history[-1], "resumeFrom": resume}
    return {"resumeFrom": resume, "restartHistory": history}


def fail_patch(state: JobState, job: Job, decision: Decision, now: datetime) -> dict[str, Any]:
    fault = decision.fault
    assert fault is not None
    reason = decision.reason or FAILED
    if reason == MAX_RESTARTS:
        message = (f"gave up after {state.restarts} restart(s) (maxRestarts "
                   f"{job.restart_policy.max_restarts}); last cause: {fault.describe()}")
    else:
        message = fault.describe()
    conds = set_condition(state.conditions, COND_FAILED, True, reason, message, now)
    conds = set_condition(conds, COND_RUNNING, False, reason, message, now)
    return {
        "phase": FAILED,
        "lastFailure": _fault_record(fault, state.attempt, now),
        "pendingReason": None,
        "conditions": conds,
    }


def invalid_spec_patch(state: JobState, message: str, now: datetime) -> dict[str, Any]:
    """A spec the operator cannot build from. A job that never started fails; a running
    one keeps its gang (built from the last good spec) and only says so."""
    conds = set_condition(state.conditions, COND_SPEC_VALID, False, INVALID_SPEC, message, now)
    if state.started:
        return {"conditions": conds}
    conds = set_condition(conds, COND_FAILED, True, INVALID_SPEC, message, now)
    return {"phase": FAILED, "conditions": conds}


def succeed_patch(state: JobState, now: datetime) -> dict[str, Any]:
    conds = set_condition(state.conditions, COND_SUCCEEDED, True, REASON_COMPLETED,
                          "every pod of the gang succeeded", now)
    conds = set_condition(conds, COND_RUNNING, False, REASON_COMPLETED, "", now)
    return {"phase": SUCCEEDED, "pendingReason": None, "completionTime": format_time(now),
            "conditions": conds}


def pending_reason(job: Job, gang: GangView) -> str | None:
    running = gang.count("Running")
    if running >= required_pods(job):
        return None
    # Stable wording (no counts) so the status is not rewritten on every pod event.
    if not gang.job_exists:
        return "gang not created yet"
    waiting = next((p.unschedulable for p in gang.pods if p.unschedulable), None)
    if waiting:
        return f"unschedulable: {waiting}"
    if len(gang.pods) < required_pods(job):
        return "creating pods"
    return "starting pods"


def observe_patch(state: JobState, job: Job, gang: GangView, now: datetime) -> dict[str, Any]:
    """Phase, nodes and pending reason of a healthy gang: only the fields that changed, so
    an idle reconcile writes nothing."""
    running = gang.count("Running") >= required_pods(job)
    phase = RUNNING if running else RESTARTING if state.phase == RESTARTING else PENDING
    reason = pending_reason(job, gang)
    conds = set_condition(state.conditions, COND_SPEC_VALID, True, REASON_VALID, "", now)
    conds = set_condition(
        conds, COND_RUNNING, running,
        REASON_GANG_RUNNING if running else REASON_GANG_PENDING,
        f"{gang.count('Running')} pods Running" if running else (reason or ""), now,
    )
    wanted: dict[str, Any] = {
        "phase": phase,
        "gang": gang_name(job.name, gang.attempt),
        "nodes": gang.nodes,
        "pendingReason": reason,
        "observedGeneration": state.gang_generation,
        "conditions": conds,
    }
    if running and state.running_since is None:
        wanted["runningSince"] = format_time(now)
        # Part of a restart's cost the launcher cannot see: its pod starting (pulls, init
        # containers) before the launcher runs.
        first = next((p for p in gang.pods if p.index == 0), None)
        if first is not None and first.start_seconds is not None:
            wanted["podStart"] = {"attempt": gang.attempt, "seconds": first.start_seconds}
    if state.restart_at is not None:
        wanted["restartAt"] = None
    return {k: v for k, v in wanted.items() if state.status.get(k) != v}
