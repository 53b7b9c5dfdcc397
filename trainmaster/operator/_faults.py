"""Fault detection, pure: Kubernetes objects (as dicts) in, typed views and faults out."""

from __future__ import annotations

import re
from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from datetime import datetime
from typing import Any

from trainmaster.api import (
    ATTEMPT_LABEL,
    COMPLETION_INDEX_ANNOTATION,
    DISRUPTION_TARGET,
    GPU_CONDITION,
    JOB_COMPLETE,
    JOB_FAILED,
    NIC_CONDITION,
    NODE_READY,
    POD_SCHEDULED,
    PREEMPTION_BY_SCHEDULER,
    UNHEALTHY_TAINT,
    parse_time,
)
from trainmaster.objects import gang_name
from trainmaster.operator._model import (
    Cause,
    Fault,
    GangView,
    JobState,
    NodeHealth,
    PodView,
)
from trainmaster.spec import Job

MAIN_CONTAINER = "trainer"


@dataclass(frozen=True)
class HealthRules:
    """Node conditions that make a node unhealthy besides Ready != True.

    ``bad`` maps a condition type to the status that means trouble, e.g. GPUHealthy=False
    (what a GPU health agent such as a node-problem-detector plugin would set).
    """

    bad: tuple[tuple[str, str], ...] = ((GPU_CONDITION, "False"), (NIC_CONDITION, "False"))

    @classmethod
    def parse(cls, items: Iterable[str]) -> HealthRules:
        pairs = []
        for item in items:
            kind, sep, status = item.partition("=")
            if not sep or not kind or status not in ("True", "False", "Unknown"):
                raise ValueError(f"{item!r}: expected TYPE=STATUS, e.g. GPUHealthy=False")
            pairs.append((kind, status))
        return cls(tuple(pairs))


def node_health(node: Mapping[str, Any], rules: HealthRules) -> NodeHealth:
    """Judge a Node: NotReady (Ready False or Unknown) or a bad condition is a problem; our
    taint means fenced. A node without a Ready condition yet is still starting, not sick."""
    spec = node.get("spec") or {}
    fenced = any(t.get("key") == UNHEALTHY_TAINT for t in spec.get("taints") or [])
    problems = []
    bad = dict(rules.bad)
    for cond in (node.get("status") or {}).get("conditions") or []:
        kind, status = cond.get("type"), cond.get("status")
        if kind == NODE_READY and status != "True":
            problems.append(f"NotReady ({cond.get('reason') or status})")
        elif kind in bad and status == bad[kind]:
            why = cond.get("reason") or cond.get("message") or ""
            problems.append(f"{kind}={status}" + (f" ({why})" if why else ""))
    return NodeHealth("; ".join(problems) or None, fenced)


def taint_value(problem: str) -> str:
    """A taint value (label-value syntax, 63 chars) naming the problem: NotReady, GPUHealthy."""
    head = re.split(r"[ =(;]", problem, maxsplit=1)[0]
    return re.sub(r"[^A-Za-z0-9_.-]", "", head)[:63] or "Unhealthy"


def _int_or_none(value: Any) -> int | None:
    try:
        return int(value)
    except (TypeError, ValueError):
        return None


def pod_view(pod: Mapping[str, Any]) -> PodView:
    meta = pod.get("metadata") or {}
    labels = meta.get("labels") or {}
    annotations = meta.get("annotations") or {}
    status = pod.get("status") or {}
    statuses = status.get("containerStatuses") or []
    # The trainer's exit code decides retryability; other containers only if it has none.
    statuses = sorted(statuses, key=lambda s: s.get("name") != MAIN_CONTAINER)
    exit_code = reason = message = None
    for cs in statuses:
        terminated = (cs.get("state") or {}).get("terminated")
        if terminated and terminated.get("exitCode"):
            exit_code = int(terminated["exitCode"])
            reason, message = terminated.get("reason"), terminated.get("message")
            break
    unschedulable = preempted_by = None
    for cond in status.get("conditions") or []:
        if cond.get("type") == POD_SCHEDULED and cond.get("status") == "False":
            unschedulable = cond.get("message") or cond.get("reason") or "not scheduled"
        if cond.get("type") == DISRUPTION_TARGET and cond.get("status") == "True" \
                and cond.get("reason") == PREEMPTION_BY_SCHEDULER:
            preempted_by = cond.get("message") or "the scheduler"
    return PodView(
        name=meta.get("name", ""),
        attempt=_int_or_none(labels.get(ATTEMPT_LABEL)),
        index=_int_or_none(annotations.get(COMPLETION_INDEX_ANNOTATION,
                                           labels.get(COMPLETION_INDEX_ANNOTATION))),
        node=(pod.get("spec") or {}).get("nodeName") or None,
        phase=status.get("phase") or "Pending",
        deleting=bool(meta.get("deletionTimestamp")),
        exit_code=exit_code,
        reason=status.get("reason") or reason,
        message=status.get("message") or message,
        unschedulable=unschedulable,
        preempted_by=preempted_by,
        start_seconds=_start_seconds(status),
    )


def _start_seconds(status: Mapping[str, Any]) -> float | None:
    """The kubelet's start of the pod (status.startTime) to the trainer container's start:
    image pulls and init containers, GPUs held and idle."""
    began = parse_time(status.get("startTime"))
    for cs in status.get("containerStatuses") or []:
        running = (cs.get("state") or {}).get("running") or {}
        started = parse_time(running.get("startedAt"))
        if cs.get("name") == MAIN_CONTAINER and began is not None and started is not None:
            return max(0.0, (started - began).total_seconds())
    return None


def _condition(obj: Mapping[str, Any], kind: str) -> dict[str, Any] | None:
    for cond in (obj.get("status") or {}).get("conditions") or []:
        if cond.get("type") == kind and cond.get("status") == "True":
            return dict(cond)
    return None


def gang_view(
    attempt: int, pods: Iterable[Mapping[str, Any]], jobs: Iterable[Mapping[str, Any]]
) -> GangView:
    """Split a job's pods and Jobs into the current attempt and leftovers of older ones.
    Objects already being deleted are ignored: they are on their way out."""
    job_exists, job_failed, job_complete, stale_jobs = False, None, False, []
    job_uid = None
    for job in jobs:
        meta = job.get("metadata") or {}
        if meta.get("deletionTimestamp"):
            continue
        if _int_or_none((meta.get("labels") or {}).get(ATTEMPT_LABEL)) != attempt:
            stale_jobs.append(meta.get("name", ""))
            continue
        job_exists, job_uid = True, meta.get("uid")
        failed = _condition(job, JOB_FAILED)
        if failed is not None:
            job_failed = failed.get("message") or failed.get("reason") or "the Job failed"
        job_complete = _condition(job, JOB_COMPLETE) is not None
    current: list[PodView] = []
    stale: list[PodView] = []
    preempted_by = None
    draining: list[PodView] = []
    for pod in pods:
        view = pod_view(pod)
        if view.preempted_by and view.attempt == attempt:
            preempted_by = view.preempted_by  # seen even while it is being deleted
        if view.deleting:
            if view.phase not in ("Succeeded", "Failed"):
                draining.append(view)
            continue
        # A pod of this attempt that the current Job does not own was left behind by a
        # Job deleted with orphaning: it is not part of the gang.
        ours = view.attempt == attempt and _controller_uid(pod) in (job_uid, None)
        (current if ours and job_exists else stale).append(view)
    return GangView(
        attempt=attempt,
        pods=tuple(current),
        job_exists=job_exists,
        job_failed=job_failed,
        job_complete=job_complete,
        stale_jobs=tuple(sorted(stale_jobs)),
        stale_pods=tuple(stale),
        preempted_by=preempted_by,
        draining=tuple(draining),
    )


def _controller_uid(obj: Mapping[str, Any]) -> str | None:
    for ref in (obj.get("metadata") or {}).get("ownerReferences") or []:
        if ref.get("controller"):
            return str(ref.get("uid"))
    return None


def retryable(job: Job, exit_code: int | None) -> bool:
    """A pod that failed with no exit code (evicted, deleted, node lost) is an infrastructure
    failure and always retryable; otherwise the restart policy decides."""
    codes = job.restart_policy.retryable_exit_codes
    return exit_code is None or codes == "any" or exit_code in codes


def _pod_failure(job: Job, pod: PodView) -> Fault:
    rank = f" (rank {pod.index})" if pod.index is not None else ""
    where = f" on {pod.node}" if pod.node else ""
    if pod.exit_code is not None:
        what = f"pod {pod.name}{rank} exited with code {pod.exit_code}{where}"
    else:
        what = f"pod {pod.name}{rank} failed{where}: {pod.reason or pod.message or 'no exit code'}"
    ok = retryable(job, pod.exit_code)
    if not ok:
        what += f" (retryable exit codes: {job.restart_policy.retryable_exit_codes})"
    return Fault(Cause.POD_FAILED, what, (pod.node,) if pod.node else (), pod.name,
                 pod.exit_code, ok)


def find_fault(
    job: Job,
    state: JobState,
    gang: GangView,
    health: Mapping[str, NodeHealth],
    now: datetime,
) -> Fault | None:
    """The first reason the current gang cannot go on, most specific first: a preemption
    explains the failures of the pods it evicted; a sick node explains its pods' failures,
    so it is blamed before them."""
    if gang.preempted_by is not None:
        return Fault(Cause.PREEMPTED, gang.preempted_by)  # no node is to blame
    sick = sorted({
        p.node for p in gang.pods
        if p.node and p.phase != "Succeeded" and not health.get(p.node, NodeHealth()).usable
    })
    if sick:
        reasons = "; ".join(
            f"{n}: {health[n].problem or 'fenced'}" for n in sick
        )
        return Fault(Cause.NODE_UNHEALTHY, f"unhealthy node {reasons}", tuple(sick))
    failed = sorted((p for p in gang.pods if p.phase == "Failed"),
                    key=lambda p: (p.index is None, p.index or 0))
    faults = [_pod_failure(job, p) for p in failed]
    fatal = next((f for f in faults if not f.retryable), None)
    if fatal is not None or faults:
        return fatal or faults[0]
    if gang.job_failed is not None:
        return Fault(Cause.GANG_FAILED, f"Job {gang_name(job.name, gang.attempt)} failed: "
                     f"{gang.job_failed}")
    return hang(job, state, now)


def progress_time(state: JobState) -> datetime | None:
    """The last sign of life of the current attempt: heartbeat, checkpoint, or the moment it
    was all Running (signals from before that belong to an older attempt)."""
    since = state.running_since
    if since is None:
        return None
    marks = [since, state.last_heartbeat]
    if state.last_checkpoint is not None:
        marks.append(state.last_checkpoint.time)
    return max(m for m in marks if m is not None)


def hang(job: Job, state: JobState, now: datetime) -> Fault | None:
    last = progress_time(state)
    if last is None:
        return None
    quiet = (now - last).total_seconds()
    limit = job.restart_policy.hang_timeout_seconds
    if quiet <= limit:
        return None
    return Fault(Cause.HANG, f"no heartbeat for {quiet:.0f}s (hangTimeoutSeconds {limit})")
