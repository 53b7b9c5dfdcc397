"""The jobs view and a job's page: progress, checkpoints, and what each recovery cost.

Everything comes from what the operator and the launcher write on the TrainingJob
(phase, attempt, restarts, restartHistory, runningSince, lastCheckpoint, resumeFrom),
the Events about it and its gangs' PodGroups (the scheduler's ``Scheduled``), and the
checkpoints the UI saw arrive (the step rate); with a Prometheus that scrapes the
launchers, the step, step rate and checkpoint age are its (trainmaster.status.job_progress,
as in `trainmaster status`).

A recovery's timeline: *fault detected* (the operator's restart record), *new gang
bound* (the scheduler's Scheduled Event on the new attempt's PodGroup), *first step*
(the first checkpoint past the one resumed from reported after that; else, for the
newest recovery, the moment its gang was Running again). Time lost = from the checkpoint
resumed from (its first report) to that first step (work redone plus the wait); lost
steps = the steps past that checkpoint that were done before the fault, estimated from
the step rate.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field
from datetime import datetime
from typing import Any

from trainmaster.api import POD_GROUP_LABEL, POD_SCHEDULED, UTC, parse_time
from trainmaster.kubeclient import JSON
from trainmaster.launch import step_of
from trainmaster.objects import gang_name
from trainmaster.status import TRAININGJOB, job_progress
from trainmaster.ui._world import Sample, World

SCHEDULED = "Scheduled"
EPOCH = datetime(1970, 1, 1, tzinfo=UTC)


@dataclass
class Recovery:
    attempt: int
    """The attempt that failed."""
    cause: str
    message: str
    detected: datetime | None
    bound: datetime | None
    first_step: datetime | None
    first_step_how: str
    resume_step: int | None
    resume_time: datetime | None
    lost_steps: int | None
    lost_seconds: float | None
    nodes: list[str] = field(default_factory=list)


@dataclass
class JobInfo:
    namespace: str
    name: str
    phase: str
    queue: str
    priority: int | None
    attempt: int
    restarts: int
    nodes: int
    gpus: int
    step: int | None
    step_rate: float | None
    """Steps per second: Prometheus' over its last 2 minutes when it has the job, else
    between the last two checkpoints seen."""
    checkpoint: str | None
    checkpoint_age: float | None
    age: float
    effective: float
    """Seconds since creation less the time lost to recoveries and to the first wait."""
    pending_reason: str | None
    gang: str | None
    recoveries: list[Recovery] = field(default_factory=list)
    running_on: list[str] = field(default_factory=list)
    progress_from: str = TRAININGJOB
    """Where step, step rate and checkpoint age come from: Prometheus or TrainingJob."""

    @property
    def key(self) -> str:
        return f"{self.namespace}/{self.name}"

    @property
    def lost(self) -> list[float]:
        return [r.lost_seconds for r in self.recoveries if r.lost_seconds is not None]


def step_rate(samples: list[Sample]) -> float | None:
    """Steps per second between the last two checkpoints of increasing step."""
    if len(samples) < 2:
        return None
    last = samples[-1]
    for before in reversed(samples[:-1]):
        seconds = (last.at - before.at).total_seconds()
        if before.step < last.step and seconds > 0:
            return (last.step - before.step) / seconds
    return None


def _event_time(event: JSON) -> datetime | None:
    for key in ("eventTime", "lastTimestamp", "firstTimestamp"):
        at = parse_time(event.get(key))
        if at is not None:
            return at
    return parse_time((event.get("metadata") or {}).get("creationTimestamp"))


Scheduled = dict[tuple[str, str], datetime]


def scheduled_index(events: Sequence[JSON], pods: Sequence[JSON] = ()) -> Scheduled:
    """(namespace, PodGroup) -> when the gang was bound: the scheduler's Scheduled Event
    on the PodGroup, else (another scheduler, e.g. kube-scheduler, posts none) the last
    of its pods' PodScheduled=True transitions. One pass each, so a page of 1,000 jobs
    does not scan them 1,000 times."""
    from_pods: Scheduled = {}
    for pod in pods:
        meta = pod.get("metadata") or {}
        group = (meta.get("labels") or {}).get(POD_GROUP_LABEL)
        if not group:
            continue
        for cond in (pod.get("status") or {}).get("conditions") or []:
            if cond.get("type") == POD_SCHEDULED and cond.get("status") == "True":
                t = parse_time(cond.get("lastTransitionTime"))
                key = (str(meta.get("namespace", "")), str(group))
                if t is not None and (key not in from_pods or t > from_pods[key]):
                    from_pods[key] = t
    out: Scheduled = {}
    for e in events:
        ref = e.get("involvedObject") or {}
        if e.get("reason") != SCHEDULED or ref.get("kind") != "PodGroup":
            continue
        t = _event_time(e)
        key = (str(ref.get("namespace", "")), str(ref.get("name", "")))
        if t is not None and (key not in out or t < out[key]):
            out[key] = t
    return {**from_pods, **out}


def job_events(events: list[JSON], namespace: str, name: str) -> list[JSON]:
    """Events about the job itself or one of its gangs' PodGroups, oldest first."""
    prefix = f"{name}-r"
    out = []
    for e in events:
        ref = e.get("involvedObject") or {}
        if ref.get("namespace") != namespace:
            continue
        if (ref.get("kind") == "TrainingJob" and ref.get("name") == name) or (
                ref.get("kind") == "PodGroup" and str(ref.get("name", "")).startswith(prefix)
                and str(ref.get("name"))[len(prefix):].isdigit()):
            out.append(e)
    return sorted(out, key=lambda e: _event_time(e) or EPOCH)


def _recoveries(tj: JSON, scheduled: Scheduled, samples: list[Sample],
                rate: float | None) -> list[Recovery]:
    meta, status = tj.get("metadata") or {}, tj.get("status") or {}
    namespace, name = meta.get("namespace", ""), meta.get("name", "")
    history = [h for h in status.get("restartHistory") or [] if isinstance(h, dict)]
    # A checkpoint's time is its first report: the new gang reports the one it resumed
    # from again, later, and that is no new progress.
    by_step: dict[int, datetime] = {}
    for s in samples:
        by_step.setdefault(s.step, s.at)
    out = []
    for i, record in enumerate(history):
        new_attempt = record.get("newAttempt")
        detected = parse_time(record.get("time"))
        bound = (scheduled.get((namespace, gang_name(name, new_attempt)))
                 if isinstance(new_attempt, int) else None)
        resume = record.get("resumeFrom")
        resume_step = step_of(str(resume).rstrip("/").rsplit("/", 1)[-1]) if resume else None
        after = bound or detected
        first = next((s.at for s in samples if after is not None and s.at > after
                      and (resume_step is None or s.step > resume_step)), None)
        how = "first checkpoint after the new gang was bound"
        if first is None and i == len(history) - 1 and \
                status.get("attempt") == new_attempt:
            first = parse_time(status.get("runningSince"))
            how = "new gang Running"
        resume_time = by_step.get(resume_step) if resume_step is not None else None
        start = resume_time or detected
        lost = (first - start).total_seconds() if first and start else None
        lost_steps = None
        if rate is not None and detected is not None and resume_time is not None:
            lost_steps = max(0, round(rate * (detected - resume_time).total_seconds()))
        elif resume_step is not None:
            # Without a rate: the checkpoints seen past the one resumed from, if any.
            done = [s.step for s in samples if detected is None or s.at <= detected]
            lost_steps = max(0, max(done, default=resume_step) - resume_step)
        out.append(Recovery(
            attempt=int(record.get("attempt") or 0), cause=str(record.get("cause") or "-"),
            message=str(record.get("message") or ""), detected=detected, bound=bound,
            first_step=first, first_step_how=how, resume_step=resume_step,
            resume_time=resume_time, lost_steps=lost_steps, lost_seconds=lost,
            nodes=[str(n) for n in record.get("nodes") or []]))
    return out


def job_info(tj: JSON, world: World, scheduled: Scheduled | None = None) -> JobInfo:
    meta, spec, status = (tj.get(k) or {} for k in ("metadata", "spec", "status"))
    namespace, name = meta.get("namespace", ""), meta.get("name", "")
    samples = world.samples.get((namespace, name), [])
    rate = step_rate(samples)
    now = world.now
    created = parse_time(meta.get("creationTimestamp"))
    age = (now - created).total_seconds() if created else 0.0
    ckpt = status.get("lastCheckpoint") or {}
    ckpt_time = parse_time(ckpt.get("time"))
    if scheduled is None:
        scheduled = scheduled_index(world.events, world.pods)
    recoveries = _recoveries(tj, scheduled, samples, rate)
    running = parse_time(status.get("runningSince"))
    phase = status.get("phase") or "New"
    # Effective: the time the job trained. Before its first gang ran, and in each
    # recovery's lost time, it did not.
    first_wait = 0.0
    if created is not None:
        first_bound = scheduled.get((namespace, gang_name(name, 0)))
        begun = first_bound or (running if not recoveries else None)
        first_wait = (begun - created).total_seconds() if begun else (
            age if phase != "Running" else 0.0)
    effective = max(0.0, age - first_wait - sum(r.lost_seconds or 0.0 for r in recoveries))
    if phase != "Running" and running is None and recoveries:
        last = recoveries[-1]
        if last.first_step is None and last.detected is not None:
            effective = max(0.0, effective - (now - last.detected).total_seconds())
    steps = [s for s in (ckpt.get("step"), (status.get("resumedFrom") or {}).get("step"))
             if isinstance(s, int)]
    priority = spec.get("priority")
    # Prometheus' live figures when it scrapes the job (as `trainmaster status`).
    progress = job_progress(
        world.live, namespace, name, step=max(steps) if steps else None, step_rate=rate,
        checkpoint_age=(now - ckpt_time).total_seconds() if ckpt_time else None)
    return JobInfo(
        namespace=namespace, name=name, phase=phase, queue=str(spec.get("queue") or "default"),
        priority=priority if isinstance(priority, int) else None,
        attempt=int(status.get("attempt") or 0), restarts=int(status.get("restarts") or 0),
        nodes=int(spec.get("nodes") or 0), gpus=int(spec.get("gpusPerPod") or 8),
        step=progress.step, step_rate=progress.step_rate, checkpoint=ckpt.get("path"),
        checkpoint_age=progress.checkpoint_age, progress_from=progress.source,
        age=age, effective=effective,
        pending_reason=status.get("pendingReason"), gang=status.get("gang"),
        recoveries=recoveries, running_on=[str(n) for n in status.get("nodes") or []])


def job_rows(world: World) -> list[JobInfo]:
    scheduled = scheduled_index(world.events, world.pods)
    rows = [job_info(tj, world, scheduled) for tj in world.trainingjobs]
    return sorted(rows, key=lambda j: (j.namespace, j.name))


def find_job(world: World, namespace: str, name: str) -> JSON | None:
    return next((tj for tj in world.trainingjobs
                 if (tj.get("metadata") or {}).get("namespace") == namespace
                 and (tj.get("metadata") or {}).get("name") == name), None)


def nodes_ran_on(tj: JSON, world: World) -> list[tuple[str, str]]:
    """(node, gang) for every pod of the job's gangs the API still has, and the nodes of
    each recovery's fault record: where it ran."""
    meta = tj.get("metadata") or {}
    namespace, name = meta.get("namespace", ""), meta.get("name", "")
    prefix = f"{name}-r"
    seen: dict[tuple[str, str], None] = {}
    for pod in world.pods:
        pmeta = pod.get("metadata") or {}
        group = str((pmeta.get("labels") or {}).get(POD_GROUP_LABEL) or "")
        node = (pod.get("spec") or {}).get("nodeName")
        if pmeta.get("namespace") == namespace and group.startswith(prefix) and node:
            seen[(node, group)] = None
    for record in (tj.get("status") or {}).get("restartHistory") or []:
        attempt = record.get("attempt") if isinstance(record, dict) else None
        for node in (record.get("nodes") if isinstance(record, dict) else None) or []:
            if isinstance(attempt, int):
                seen[(str(node), gang_name(name, attempt))] = None
    return sorted(seen, key=lambda p: (p[1], p[0]))


def describe(value: Any) -> str:
    return "-" if value is None else str(value)
