"""One recovery drill on the real training job: kill one rank for real, let the operator
restart the gang, and measure from the files what came back.

    detect_seconds   the kill -> the TrainingJob's attempt moves on (the operator acted)
    recover_seconds  the kill -> every rank of the new attempt has logged a training step
                     (the runtime's timestamps on the ranks' log lines)
    last_checkpoint_step  newest complete checkpoint in the volume when the gang died
    checkpoint_at_start   newest complete checkpoint in the volume when the new gang's first
                     rank decided where to resume (its decision file's mtime): a dying gang
                     may complete one after the restart was decided
    resumed_step     the step rank 0 logs it resumed at ("resumed from ... at step N")
    lost_steps       the last step any rank of the killed attempt logged - resumed_step
    phases           where the recovery's time went, each from the kill: the new pods'
                     containers all started (their status), the workers up (a torchrun
                     worker's first line), rank 0 resumed (its resume line)

Under torchrun (the PyTorch example) rank 0 alone logs the steps, after each step's
all-reduce that every rank joins: its step is the gang's. Its rank 0 is the rendezvous'
choice, on any pod.

Faults: `process-kill`, `container-kill`, `node-not-ready`, `nic-down`, and
`process-hang`: SIGSTOP to a rank's training process, which the operator's hang
detection (restartPolicy.hangTimeoutSeconds, from the launcher's heartbeats) must find
and restart the gang for.

The demo, the realnode test and `trainmaster bench recovery --real` all run this.
"""

from __future__ import annotations

import time
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from trainmaster.api import COMPLETION_INDEX_ANNOTATION, GANG_UID_LABEL, parse_time
from trainmaster.cluster import ClusterError
from trainmaster.drill._faults import (
    Killed,
    hang_process,
    kill_container,
    kill_process,
    stop_kubelet,
    take_rail_down,
)
from trainmaster.drill._logs import (
    RESUMED_RANK0,
    WORKER_UP,
    RankLog,
    checkpoint_steps,
    pod_log,
)
from trainmaster.drill._stack import RealStack, Report, _wait, job_pods, job_status
from trainmaster.kubeclient import SyncKube
from trainmaster.launch import decision_file
from trainmaster.spec import Job

Fault = Callable[[list[Any], Any, dict[str, Any]], Killed]
SCENARIOS: dict[str, Fault] = {
    "process-kill": kill_process,
    "container-kill": kill_container,
    "node-not-ready": stop_kubelet,
    "nic-down": take_rail_down,
    "process-hang": hang_process,
}
MOVES_THE_GANG = {"node-not-ready", "nic-down"}
"""Scenarios after which the gang must run without the faulted node."""


@dataclass(frozen=True)
class DrillResult:
    scenario: str
    killed: Killed
    attempt: int
    """The attempt that was killed; the gang came back as a later one."""
    detect_seconds: float
    recover_seconds: float
    last_checkpoint_step: int | None
    resumed_step: int
    resumed_from: str
    last_step_before: int
    steps_after: int
    """The highest step every rank of the new attempt had logged when the drill ended."""
    nodes_after: tuple[str, ...]
    """Where the new attempt's pods run."""
    checkpoint_at_start: int | None = None
    killed_at: float = 0.0
    """Unix time of the fault, to time what follows it (an alert firing)."""
    phases: tuple[tuple[str, float], ...] = ()
    """(phase, seconds after the fault) of the recovery, as this module's docstring says."""

    @property
    def lost_steps(self) -> int:
        return self.last_step_before - self.resumed_step

    @property
    def ok(self) -> bool:
        moved = (self.scenario not in MOVES_THE_GANG
                 or self.killed.node not in self.nodes_after)
        expected = self.checkpoint_at_start or self.last_checkpoint_step
        return (self.last_checkpoint_step is not None
                and self.resumed_step == expected
                and self.steps_after > self.resumed_step and moved)

    def row(self) -> dict[str, Any]:
        return {
            "scenario": self.scenario,
            "detect_seconds": round(self.detect_seconds, 2),
            "recover_seconds": round(self.recover_seconds, 2),
            "last_checkpoint_step": self.last_checkpoint_step,
            "checkpoint_at_start": self.checkpoint_at_start,
            "resumed_step": self.resumed_step,
            "lost_steps": self.lost_steps,
            **{f"{name}_seconds": round(at, 2) for name, at in self.phases},
            "ok": self.ok,
        }


def _index(pod: dict[str, Any]) -> int:
    return int((pod["metadata"].get("annotations") or {}).get(COMPLETION_INDEX_ANNOTATION, "0"))


def steppers(job: Job) -> int:
    """How many pods' logs show the gang's steps: every rank's (the numpy example), or
    rank 0's alone under torchrun."""
    return 1 if job.launcher == "torchrun" else job.nodes


def _logs(stack: RealStack, pods: list[dict[str, Any]]) -> dict[int, RankLog | None]:
    return {_index(p): pod_log(stack.nodes, stack.namespace, p["metadata"]["name"])
            for p in pods}


def wait_training(stack: RealStack, kube: SyncKube, report: Report, timeout: float = 300,
                  after_checkpoint: int = 0) -> tuple[int, list[dict[str, Any]]]:
    """The job's current attempt and its pods, once every rank runs on a real node and has
    logged a step, and the newest checkpoint on disk is the one the TrainingJob records
    (the launcher has reported it) and is past `after_checkpoint` (so a drill after
    another one resumes from a checkpoint of its own)."""
    ns, job = stack.namespace, stack.job

    def training() -> tuple[int, list[dict[str, Any]]] | None:
        status = job_status(kube, ns, job.name)
        attempt = int(status.get("attempt", 0))
        pods = [p for p in job_pods(kube, ns, job.name, attempt)
                if (p.get("status") or {}).get("phase") == "Running"]
        logs = _logs(stack, pods)
        steps = {i: (lg.last_step() if lg else None) for i, lg in logs.items()}
        on_disk = checkpoint_steps(stack.checkpoints)
        recorded = (status.get("lastCheckpoint") or {}).get("step")
        report(f"{job.name}: {status.get('phase', '-')}, attempt {attempt}, ranks at steps "
               f"{dict(sorted(steps.items()))}, checkpoints {on_disk[-3:]}, recorded {recorded}")
        if (len(pods) == job.nodes and sum(1 for s in steps.values() if s) >= steppers(job)
                and all(p["spec"].get("nodeName") in stack.record.real_nodes for p in pods)
                and on_disk and recorded == on_disk[-1] and on_disk[-1] > after_checkpoint):
            return attempt, pods
        return None

    found: tuple[int, list[dict[str, Any]]] = _wait(
        training, f"{job.name} to train on the real nodes", timeout, 0.5)
    return found


Watch = Callable[[SyncKube, Killed, float], None]
"""Called at every look while the drill waits (the kube client, the fault, its time)."""


def run_drill(stack: RealStack, scenario: str, report: Report, timeout: float = 300,
              after_checkpoint: int = 0, watch: Watch | None = None,
              hold: Callable[[SyncKube, DrillResult], None] | None = None) -> DrillResult:
    """`watch` is called at every look until the gang trains again; `hold`, with the
    result, before the fault is undone (a rail stays down until its alert has fired)."""
    fault = SCENARIOS[scenario]
    with SyncKube.connect(stack.kubeconfig) as kube:
        attempt, pods = wait_training(stack, kube, report, timeout, after_checkpoint)
        victim = max(pods, key=_index)  # the last rank (rank 0 hosts the rendezvous)
        before = {i: (lg.last_step() or 0) for i, lg in _logs(stack, pods).items() if lg}
        killed_at = time.time()
        killed = fault(stack.nodes, stack.record, victim)
        try:
            looked = (lambda: watch(kube, killed, killed_at)) if watch else (lambda: None)
            result = _measure(stack, kube, scenario, killed, killed_at, attempt, pods, before,
                              report, timeout, looked)
            if hold is not None:
                hold(kube, result)
            return result
        finally:
            if killed.undo is not None:
                killed.undo()


def _measure(stack: RealStack, kube: SyncKube, scenario: str, killed: Killed,
             killed_at: float, attempt: int, pods: list[dict[str, Any]],
             before: dict[int, int], report: Report, timeout: float,
             looked: Callable[[], None]) -> DrillResult:
    ns, name = stack.namespace, stack.job.name
    report(f"{scenario}: killed {killed.what} of {killed.pod} on {killed.node}")

    def moved_on() -> dict[str, Any] | None:
        # The killed attempt's ranks may log a little more before they notice; their log
        # files go with their pods, so read them while they are there.
        looked()
        for i, lg in _logs(stack, pods).items():
            if lg is not None:
                before[i] = max(before.get(i, 0), lg.last_step() or 0)
        status = job_status(kube, ns, name)
        return status if int(status.get("attempt", 0)) > attempt else None

    restarted: dict[str, Any] = _wait(moved_on, f"the operator to restart {name}", timeout, 0.2)
    detect = time.time() - killed_at
    on_disk = checkpoint_steps(stack.checkpoints)
    last_checkpoint = on_disk[-1] if on_disk else None
    report(f"{scenario}: the operator restarted the gang after {detect:.1f}s; newest "
           f"checkpoint on disk: step {last_checkpoint}"
           f"{_completed_vs_decision(stack, last_checkpoint, restarted)}")

    def back() -> tuple[float, int, tuple[str, int] | None, tuple[str, ...], str] | None:
        looked()
        status = job_status(kube, ns, name)
        now = int(status.get("attempt", 0))
        new = [p for p in job_pods(kube, ns, name, now)
               if (p.get("status") or {}).get("phase") == "Running"]
        logs = _logs(stack, new)
        firsts = [lg.steps()[0] for lg in logs.values() if lg and lg.steps()]
        report(f"{scenario}: attempt {now}, {len(firsts)} of {stack.job.nodes} ranks "
               "training again")
        if len(new) < stack.job.nodes or len(firsts) < steppers(stack.job):
            return None
        resumed = _rank0_resumed(logs)
        latest = min(s for lg in logs.values() if lg and (s := lg.last_step()) is not None)
        where = tuple(sorted(p["spec"].get("nodeName") or "" for p in new))
        uid = (new[0]["metadata"].get("labels") or {}).get(GANG_UID_LABEL, "")
        phases.clear()
        phases.extend(_phases(new, logs, killed_at))
        return max(t for t, _ in firsts) - killed_at, latest, resumed, where, uid

    phases: list[tuple[str, float]] = []
    recover, steps_after, resumed, where, uid = _wait(back, f"{name} to train again",
                                                      timeout, 0.3)
    at_start = _newest_at_decision(stack, uid)
    report(f"{scenario}: newest complete checkpoint when the new gang decided where to "
           f"resume: step {at_start}")
    if resumed is None:
        resumed_from, resumed_step = "", 0  # started over: nothing to resume from
    else:
        resumed_from, resumed_step = resumed
    return DrillResult(scenario, killed, attempt, detect, recover, last_checkpoint,
                       resumed_step, resumed_from, max(before.values(), default=0),
                       steps_after, where, at_start, killed_at, tuple(phases))


def _rank0_resumed(logs: dict[int, RankLog | None]) -> tuple[str, int] | None:
    """Rank 0's resume: the first pod's (the numpy example's rank 0), else whichever pod
    torchrun's rendezvous gave rank 0."""
    first = logs.get(0)
    found = first.resumed(0) if first else None
    return found or next((r for lg in logs.values() if lg and (r := lg.resumed(0))), None)


def _phases(pods: list[dict[str, Any]], logs: dict[int, RankLog | None], killed_at: float
            ) -> list[tuple[str, float]]:
    """Where a new gang's recovery time went (this module's docstring), from the pods'
    status and their logs; a phase that left no trace is left out."""
    out: list[tuple[str, float]] = []
    started = [parse_time(c["state"]["running"].get("startedAt"))
               for p in pods for c in (p.get("status") or {}).get("containerStatuses") or []
               if "running" in (c.get("state") or {})]
    if started and all(t is not None for t in started):
        out.append(("containers_started", max(t.timestamp() for t in started if t) - killed_at))
    up = [t for lg in logs.values() if lg and (t := lg.first_time(WORKER_UP)) is not None]
    if len(up) == len(logs):
        out.append(("workers_up", max(up) - killed_at))
    resumed = [t for lg in logs.values()
               if lg and (t := lg.first_time(RESUMED_RANK0)) is not None]
    if resumed:
        out.append(("resumed", min(resumed) - killed_at))
    return out


def _newest_at_decision(stack: RealStack, gang_uid: str) -> int | None:
    """The newest checkpoint whose COMPLETE marker is older than the new gang's resume
    decision (trainmaster.launch._resume publishes it as a file in the volume)."""
    try:
        decided = decision_file(stack.checkpoints, gang_uid).stat().st_mtime
    except OSError:
        return None
    steps = []
    for step in checkpoint_steps(stack.checkpoints):
        try:
            done = (stack.checkpoints / f"step-{step}" / "COMPLETE").stat().st_mtime
        except OSError:
            continue
        if done <= decided:
            steps.append(step)
    return max(steps, default=None)

def _completed_vs_decision(stack: RealStack, step: int | None, status: dict[str, Any]) -> str:
    """When the newest checkpoint was completed (its COMPLETE marker's mtime), against the
    time the operator recorded its restart decision: a dying gang may still write one."""
    history = status.get("restartHistory") or []
    if step is None or not history or not history[-1].get("time"):
        return ""
    decided = parse_time(history[-1]["time"])
    if decided is None:
        return ""
    try:
        done = (stack.checkpoints / f"step-{step}" / "COMPLETE").stat().st_mtime
    except OSError:
        return ""
    delta = done - decided.timestamp()
    return (f", completed {abs(delta):.2f}s {'after' if delta > 0 else 'before'} the restart "
            f"decision (resume from {history[-1].get('resumeFrom')})")


def ensure_scenario(name: str) -> None:
    if name not in SCENARIOS:
        raise ClusterError(f"unknown drill {name!r}: choose one of {', '.join(SCENARIOS)}")
