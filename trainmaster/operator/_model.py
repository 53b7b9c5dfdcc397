"""What the operator reads and decides, as plain typed values (no Kubernetes client here).

A TrainingJob's status is the operator's whole memory. Everything it must not forget across
its own restarts lives there, and is written before the side effects it causes:

    status.attempt         the gang that should exist (objects named <job>-r<attempt>)
    status.restarts        restarts counted against restartPolicy.maxRestarts
    status.resumeFrom      the checkpoint the current attempt was started from
    status.gangGeneration  metadata.generation the current attempt was built from
    status.restartAt       when the current attempt may be created (restart backoff)
    status.runningSince    when every pod of the current attempt was first Running
    status.lastCheckpoint  {path, step, time}: written by the launcher, never by us
    status.lastHeartbeat   written by the launcher, never by us
    status.resumedFrom     {path, step, attempt, time}: written by the launcher when its
                           gang resumed from a newer checkpoint on disk than resumeFrom
    status.lastRestart     {seconds, attempt, time}: written by the launcher of an attempt
                           that resumed from a checkpoint: its start to its first step
    status.podStart        {seconds, attempt}: the current attempt's rank-0 pod, from its
                           start (status.startTime) to its trainer container's start
"""

from __future__ import annotations

import enum
from dataclasses import dataclass
from datetime import UTC, datetime
from typing import Any, NamedTuple

from trainmaster.api import COND_FAILED, COND_SUSPENDED, EVENT_SPEC_CHANGED, parse_time

BACKOFF_CAP_SECONDS = 600
"""restartPolicy.backoffSeconds doubles per restart up to this (the spec's documented cap)."""
HISTORY_LIMIT = 20
"""Restarts kept in status.restartHistory (the newest)."""


def _seconds(raw: Any) -> float | None:
    """`seconds` of a status object, when it is a number of seconds."""
    seconds = raw.get("seconds") if isinstance(raw, dict) else None
    if isinstance(seconds, bool) or not isinstance(seconds, int | float) or seconds < 0:
        return None
    return float(seconds)


class Cause(enum.StrEnum):
    """Why a gang is replaced. Every restart Event and status.lastFailure names one."""

    POD_FAILED = "PodFailed"
    NODE_UNHEALTHY = "NodeUnhealthy"
    HANG = "Hang"
    GANG_FAILED = "GangFailed"
    """The Job failed with no failed pod left to blame (a pod was deleted or evicted)."""
    SPEC_CHANGED = EVENT_SPEC_CHANGED
    """The TrainingJob's spec changed: a new gang, not counted as a restart."""
    PREEMPTED = "Preempted"
    """The scheduler evicted the gang for a higher-priority one (or a lender's quota):
    a new gang from the last checkpoint, not counted as a restart."""
    RESUMED = "Resumed"
    """spec.suspend went back to false: a new gang from the newest checkpoint, not counted
    as a restart."""


class Key(NamedTuple):
    namespace: str
    name: str


def utcnow() -> datetime:
    return datetime.now(UTC)


@dataclass(frozen=True)
class Checkpoint:
    path: str
    step: int | None = None
    time: datetime | None = None

    @classmethod
    def from_status(cls, raw: Any) -> Checkpoint | None:
        if not isinstance(raw, dict) or not raw.get("path"):
            return None
        step = raw.get("step")
        return cls(str(raw["path"]), step if isinstance(step, int) else None,
                   parse_time(raw.get("time")))


@dataclass(frozen=True)
class JobState:
    """A TrainingJob as the operator needs it: identity, generation and its status."""

    namespace: str
    name: str
    uid: str
    generation: int
    resource_version: str
    status: dict[str, Any]

    @classmethod
    def from_body(cls, body: dict[str, Any]) -> JobState:
        meta = body.get("metadata") or {}
        return cls(
            namespace=meta.get("namespace", ""),
            name=meta.get("name", ""),
            uid=meta.get("uid", ""),
            generation=int(meta.get("generation") or 1),
            resource_version=str(meta.get("resourceVersion", "")),
            status=dict(body.get("status") or {}),
        )

    @property
    def phase(self) -> str | None:
        phase = self.status.get("phase")
        return phase if isinstance(phase, str) else None

    @property
    def started(self) -> bool:
        """Whether an attempt was ever recorded (the first one is written before it exists)."""
        return isinstance(self.status.get("attempt"), int)

    @property
    def attempt(self) -> int:
        return _int(self.status.get("attempt"))

    @property
    def restarts(self) -> int:
        return _int(self.status.get("restarts"))

    @property
    def resume_from(self) -> str | None:
        value = self.status.get("resumeFrom")
        return value if isinstance(value, str) and value else None

    @property
    def resume_point(self) -> str | None:
        """The checkpoint a gang created now resumes from: the newest one reported, which
        may have arrived after the restart was decided (the old gang's last one)."""
        checkpoint = self.last_checkpoint
        return checkpoint.path if checkpoint is not None else self.resume_from

    @property
    def gang_generation(self) -> int | None:
        value = self.status.get("gangGeneration")
        return value if isinstance(value, int) else None

    @property
    def last_checkpoint(self) -> Checkpoint | None:
        return Checkpoint.from_status(self.status.get("lastCheckpoint"))

    @property
    def restart_seconds(self) -> float | None:
        """The last restart's cost: the launcher's start to its first step
        (status.lastRestart), plus its rank-0 pod's start to its trainer container's
        start (status.podStart) when both are of the same attempt. None before any report."""
        restart = self.status.get("lastRestart")
        seconds = _seconds(restart)
        if seconds is None or not isinstance(restart, dict):
            return None
        pod = self.status.get("podStart")
        same = isinstance(pod, dict) and pod.get("attempt") == restart.get("attempt")
        return seconds + ((_seconds(pod) or 0.0) if same else 0.0)

    @property
    def last_heartbeat(self) -> datetime | None:
        return parse_time(self.status.get("lastHeartbeat"))

    @property
    def running_since(self) -> datetime | None:
        return parse_time(self.status.get("runningSince"))

    @property
    def restart_at(self) -> datetime | None:
        return parse_time(self.status.get("restartAt"))

    @property
    def conditions(self) -> list[dict[str, Any]]:
        raw = self.status.get("conditions")
        return [c for c in raw if isinstance(c, dict)] if isinstance(raw, list) else []

    def condition(self, kind: str) -> dict[str, Any] | None:
        return next((c for c in self.conditions if c.get("type") == kind), None)

    @property
    def suspended(self) -> bool:
        """Whether the operator removed the gang for spec.suspend (and has not resumed it)."""
        cond = self.condition(COND_SUSPENDED)
        return cond is not None and cond.get("status") == "True"

    @property
    def failure_reason(self) -> str | None:
        cond = self.condition(COND_FAILED)
        return str(cond.get("reason")) if cond and cond.get("status") == "True" else None


def _int(value: Any) -> int:
    return value if isinstance(value, int) else 0


@dataclass(frozen=True)
class PodView:
    """One pod of a gang, reduced to what fault detection reads."""

    name: str
    attempt: int | None
    index: int | None
    node: str | None
    phase: str
    deleting: bool = False
    exit_code: int | None = None
    reason: str | None = None
    message: str | None = None
    unschedulable: str | None = None
    """PodScheduled=False's message: why the pod waits."""
    preempted_by: str | None = None
    """The scheduler's DisruptionTarget condition (PreemptionByScheduler): by whom."""
    start_seconds: float | None = None
    """status.startTime to the trainer container's start (pulls, init containers)."""


@dataclass(frozen=True)
class GangView:
    """The live objects of a job: the current attempt's pods and Job, and leftovers."""

    attempt: int
    pods: tuple[PodView, ...] = ()
    """Pods of the current attempt that are not being deleted."""
    job_exists: bool = False
    job_failed: str | None = None
    """The current Job's Failed condition message, when it has one."""
    job_complete: bool = False
    stale_jobs: tuple[str, ...] = ()
    """Jobs of other attempts not yet being deleted."""
    stale_pods: tuple[PodView, ...] = ()
    preempted_by: str | None = None
    """A pod of this attempt (deleted or not) was preempted: the scheduler's message."""
    draining: tuple[PodView, ...] = ()
    """Pods being deleted that have not finished: an old gang still in its grace period,
    which may yet write a final checkpoint."""

    @property
    def nodes(self) -> list[str]:
        """Nodes of the current pods, in rank order."""
        ranked = sorted(self.pods, key=lambda p: (p.index is None, p.index or 0, p.name))
        return [p.node for p in ranked if p.node]

    def count(self, phase: str) -> int:
        return sum(1 for p in self.pods if p.phase == phase)


@dataclass(frozen=True)
class Fault:
    """Why the current gang cannot go on."""

    cause: Cause
    message: str
    nodes: tuple[str, ...] = ()
    """Nodes blamed (fenced for NodeUnhealthy)."""
    pod: str | None = None
    exit_code: int | None = None
    retryable: bool = True

    def describe(self) -> str:
        unnamed = [n for n in self.nodes if n not in self.message]
        blamed = f" (node {', '.join(unnamed)})" if unnamed else ""
        return f"{self.cause}: {self.message}{blamed}"


class Action(enum.Enum):
    """What one reconcile pass does. Each value documents its side effects, in order."""

    DONE = "done"
    """Terminal phase: nothing to do."""
    WAIT = "wait"
    """Restart backoff: clean up the old gang, create nothing until status.restartAt."""
    START = "start"
    """No attempt recorded: write attempt 0 to status, then create gang r0."""
    RESTART = "restart"
    """Write attempt+1 (and restarts+1 unless the spec changed), then fence blamed nodes,
    post Events, delete the old gang and create the new one (after the backoff)."""
    FAIL = "fail"
    """Write phase Failed with the reason, then stop the gang's remaining pods."""
    SHRINK = "shrink"
    """An elastic gang lost members but at least minNodes run on: record the new world
    size, fence blamed nodes, post an Event, delete the lost pods (the Job replaces them
    with pending pods: the gang grows back when they are bound)."""
    SUCCEED = "succeed"
    """Write phase Succeeded."""
    SUSPEND = "suspend"
    """spec.suspend: write phase Suspended (condition Suspended=True), then delete the
    gang's Jobs, pods and PodGroups. The checkpoint and status.lastCheckpoint are kept;
    the resume is a RESTART (cause Resumed, not counted) from the newest checkpoint."""
    OBSERVE = "observe"
    """Healthy: make the gang's objects match the spec, record phase and nodes."""


@dataclass(frozen=True)
class Decision:
    action: Action
    fault: Fault | None = None
    reason: str | None = None
    """Failed condition reason (FAIL)."""
    backoff: float = 0.0
    """Seconds before the new gang is created (RESTART)."""
    counted: bool = True
    """Whether a RESTART counts against maxRestarts (a spec change does not)."""
    lost: tuple[str, ...] = ()
    """The pods an elastic gang goes on without (SHRINK)."""
    sizes: tuple[int, int] | None = None
    """World size before and after (SHRINK)."""
    wake_after: float | None = None
    """Seconds until this job needs another look even if nothing happens (backoff end, hang
    deadline); None when only an event can change anything."""


@dataclass(frozen=True)
class NodeHealth:
    """A node's health as the operator judges it."""

    problem: str | None = None
    """Why the node is unhealthy (NotReady, GPUHealthy=False, ...), None if healthy."""
    fenced: bool = False
    """Whether it carries the trainmaster.io/unhealthy taint."""

    @property
    def usable(self) -> bool:
        return self.problem is None and not self.fenced
