"""A torchrun job's worker killed, and torchrun restarting it in place: the demo's drill
for its headline job (examples/transformer). Or its container lost, and restarted in its
pod by the kubelet (a rigid torchrun job's pods restart on failure: docs/operator.md).

The fault is SIGKILL to one worker process (torchrun's child that runs the training
script, found through its container's cgroup). torchrun's agents then stop the worker
group on every pod, rendezvous again and start new workers, which resume at the newest
complete checkpoint; the pods, their containers and the gang's attempt stay as they were.
For `container-kill` the whole container is killed (`ctr tasks kill`): the kubelet starts
it again in the same pod and its new torchrun agent rejoins the others' rendezvous; the
pods and the attempt stay, one container restarted.
Everything measured is read from the ranks' log files (kubelet's CRI logs, stamped by the
runtime), the pods' status and the checkpoint folder:

    recover_seconds  the kill -> the first training step logged after it
    resumed_step     the step a rank logs it resumed at ("resumed from ... at step N")
    checkpoint_at_resume  newest complete checkpoint on disk when that line was seen
    in_place         same attempt, same pods, no container restarted (one, for a container
                     killed)
    phases           the killed container started again (container-kill), every pod's
                     new workers up (their first line), rank 0 resumed: from the kill

If torchrun gives up (its --max-restarts spent, or its restarted round fails), the
operator restarts the gang instead: the result says so (in_place False), it does not hide
it.
"""

from __future__ import annotations

import re
import time
from dataclasses import dataclass
from typing import Any

from trainmaster.api import parse_time
from trainmaster.drill._faults import Killed, kill_container, kill_process
from trainmaster.drill._logs import LogLine, checkpoint_steps, pod_log
from trainmaster.drill._stack import RealStack, Report, _wait, job_pods, job_status
from trainmaster.kubeclient import SyncKube

LOSS = re.compile(r"^step (\d+) loss ([0-9.]+)")
RESUMED = re.compile(r"^rank \d+: resumed from (\S+) at step (\d+)")
STARTED = re.compile(r"^rank \d+ of \d+: pid \d+, torchrun restart (\d+)")
FAULTS = {"process-kill": kill_process, "container-kill": kill_container}
"""The faults torchrun's job recovers from in place; each one's restarted containers."""
RESTARTED_CONTAINERS = {"process-kill": 0, "container-kill": 1}


@dataclass(frozen=True)
class InPlaceResult:
    killed: Killed
    killed_at: float
    attempt: int
    attempt_after: int
    pods: tuple[str, ...]
    pods_after: tuple[str, ...]
    container_restarts: int
    """Container restarts of the pods between the kill and the recovery."""
    torchrun_restart: int | None
    """torchrun's restart count the new workers print (TORCHELASTIC_RESTART_COUNT)."""
    recover_seconds: float
    last_step_before: int
    checkpoint_at_kill: int | None
    resumed_from: str
    resumed_step: int | None
    checkpoint_at_resume: int | None
    steps_after: int
    losses_before: tuple[tuple[int, float], ...]
    """(step, loss) as rank 0 logged them before the restart."""
    losses_after: tuple[tuple[int, float], ...]
    """(step, loss) of the new workers' rank 0."""
    scenario: str = "process-kill"
    phases: tuple[tuple[str, float], ...] = ()
    """(phase, seconds after the kill), as this module's docstring says."""

    @property
    def in_place(self) -> bool:
        return (self.attempt_after == self.attempt and self.pods_after == self.pods
                and self.container_restarts == RESTARTED_CONTAINERS[self.scenario])

    @property
    def lost_steps(self) -> int:
        return self.last_step_before - (self.resumed_step or 0)

    @property
    def ok(self) -> bool:
        return (self.in_place and self.resumed_step is not None
                and self.resumed_step == self.checkpoint_at_resume
                and self.steps_after > self.resumed_step)

    def row(self) -> dict[str, Any]:
        return {"scenario": "worker-kill" if self.scenario == "process-kill"
                else self.scenario, "in_place": self.in_place,
                "recover_seconds": round(self.recover_seconds, 2),
                "checkpoint_at_kill": self.checkpoint_at_kill,
                "resumed_step": self.resumed_step, "lost_steps": self.lost_steps,
                "torchrun_restart": self.torchrun_restart,
                "container_restarts": self.container_restarts,
                **{f"{name}_seconds": round(at, 2) for name, at in self.phases},
                "ok": self.ok}


def _lines(stack: RealStack, pods: list[dict[str, Any]]) -> list[LogLine]:
    """Every pod's log lines, in time order (rank 0 may be on any pod: torchrun's
    rendezvous assigns the ranks)."""
    out: list[LogLine] = []
    for pod in pods:
        found = pod_log(stack.nodes, stack.namespace, pod["metadata"]["name"])
        out += found.lines if found else []
    return sorted(out, key=lambda ln: ln.time)


def losses(lines: list[LogLine]) -> list[tuple[float, int, float]]:
    return [(ln.time, int(m.group(1)), float(m.group(2))) for ln in lines
            if (m := LOSS.match(ln.text))]


def logged_step(stack: RealStack, pods: list[dict[str, Any]]) -> int:
    """The newest step any of the pods' ranks has logged a loss for (0 before the first)."""
    seen = losses(_lines(stack, pods))
    return max((step for _, step, _ in seen), default=0)


def _restarts(pods: list[dict[str, Any]]) -> int:
    return sum(int(c.get("restartCount", 0)) for p in pods
               for c in (p.get("status") or {}).get("containerStatuses") or [])


def _running(kube: SyncKube, stack: RealStack, attempt: int) -> list[dict[str, Any]]:
    return [p for p in job_pods(kube, stack.namespace, stack.job.name, attempt)
            if (p.get("status") or {}).get("phase") == "Running"]


def wait_torch_training(stack: RealStack, kube: SyncKube, report: Report, min_step: int,
                        timeout: float = 600) -> tuple[int, list[dict[str, Any]]]:
    """The job's attempt and pods once every pod runs on a real node, rank 0 has logged
    step `min_step` and a checkpoint is complete on disk."""
    job = stack.job

    def training() -> tuple[int, list[dict[str, Any]]] | None:
        status = job_status(kube, stack.namespace, job.name)
        attempt = int(status.get("attempt", 0))
        pods = _running(kube, stack, attempt)
        seen = losses(_lines(stack, pods))
        on_disk = checkpoint_steps(stack.checkpoints)
        last = seen[-1][1:] if seen else None
        report(f"{job.name}: {status.get('phase', '-')}, attempt {attempt}, {len(pods)} pods "
               f"running, rank 0 at (step, loss) {last}, checkpoints {on_disk[-3:]}")
        if (len(pods) == job.nodes and last is not None and last[0] >= min_step and on_disk
                and all(p["spec"].get("nodeName") in stack.record.real_nodes for p in pods)):
            return attempt, pods
        return None

    found: tuple[int, list[dict[str, Any]]] = _wait(
        training, f"{job.name} to train on the real nodes to step {min_step}", timeout, 1.0)
    return found


def _phases(pods: list[dict[str, Any]], lines: list[LogLine], killed_at: float,
            resumed_at: float) -> tuple[tuple[str, float], ...]:
    """Where the in-place recovery's time went (this module's docstring)."""
    out: list[tuple[str, float]] = []
    started = [t.timestamp() for p in pods
               for c in (p.get("status") or {}).get("containerStatuses") or []
               if (t := parse_time(((c.get("state") or {}).get("running") or {})
                                   .get("startedAt"))) is not None
               and t.timestamp() >= int(killed_at)]
    if started:
        out.append(("container_started", max(started) - killed_at))
    up = [ln.time for ln in lines if killed_at < ln.time and STARTED.match(ln.text)]
    if up:
        out.append(("workers_up", max(t for t in up if t <= resumed_at) - killed_at
                    if any(t <= resumed_at for t in up) else min(up) - killed_at))
    out.append(("resumed", resumed_at - killed_at))
    return tuple(out)


def run_worker_kill(stack: RealStack, report: Report, min_step: int = 30,
                    timeout: float = 300, scenario: str = "process-kill") -> InPlaceResult:
    """Kill one worker of the torchrun job (or, `container-kill`, its container) and
    measure how it came back."""
    fault = FAULTS[scenario]
    ns, name = stack.namespace, stack.job.name
    with SyncKube.connect(stack.kubeconfig) as kube:
        attempt, pods = wait_torch_training(stack, kube, report, min_step, timeout * 2)
        victim = max(pods, key=lambda p: p["metadata"]["name"])
        restarts_before = _restarts(pods)
        before = losses(_lines(stack, pods))
        at_kill = checkpoint_steps(stack.checkpoints)
        killed_at = time.time()
        killed = fault(stack.nodes, stack.record, victim)
        report(f"{scenario}: killed {killed.what} of {killed.pod} on {killed.node}")
        resumed_seen: dict[str, Any] = {}

        def back() -> tuple[int, list[dict[str, Any]], list[LogLine]] | None:
            now = int(job_status(kube, ns, name).get("attempt", 0))
            current = _running(kube, stack, now)
            lines = _lines(stack, current)
            resumed = [(ln, m) for ln in lines
                       if ln.time > killed_at and (m := RESUMED.match(ln.text))]
            if resumed and "step" not in resumed_seen:
                on_disk = checkpoint_steps(stack.checkpoints)
                resumed_seen.update(step=int(resumed[0][1].group(2)),
                                    path=resumed[0][1].group(1), at=resumed[0][0].time,
                                    newest=on_disk[-1] if on_disk else None)
            # Steps of the new workers: after their resume (the surviving rank 0 may log a
            # step of the old round after the kill, before it notices).
            stepped = losses([ln for ln in lines if ln.time > resumed_seen.get("at", 1e18)])
            report(f"{scenario}: attempt {now}, {len(current)} pods running, "
                   f"{'resumed' if resumed else 'not resumed yet'}, "
                   f"{len(stepped)} steps logged since the kill")
            if len(current) == stack.job.nodes and resumed and stepped:
                return now, current, lines
            return None

        now, current, lines = _wait(back, f"{name} to train again after the kill", timeout,
                                    0.5)
        stepped = losses([ln for ln in lines if ln.time > resumed_seen["at"]])
        before += losses([ln for ln in lines if killed_at < ln.time < resumed_seen["at"]])
        restarted = [int(m.group(1)) for ln in lines if ln.time > killed_at
                     and (m := STARTED.match(ln.text))]
        return InPlaceResult(
            killed=killed, killed_at=killed_at, attempt=attempt, attempt_after=now,
            pods=tuple(sorted(p["metadata"]["uid"] for p in pods)),
            pods_after=tuple(sorted(p["metadata"]["uid"] for p in current)),
            container_restarts=_restarts(current) - restarts_before if now == attempt
            else _restarts(current),
            torchrun_restart=max(restarted) if restarted else None,
            recover_seconds=stepped[0][0] - killed_at,
            last_step_before=before[-1][1] if before else 0,
            checkpoint_at_kill=at_kill[-1] if at_kill else None,
            resumed_from=str(resumed_seen.get("path", "")),
            resumed_step=resumed_seen.get("step"),
            checkpoint_at_resume=resumed_seen.get("newest"),
            steps_after=stepped[-1][1],
            losses_before=tuple((s, v) for _, s, v in before),
            losses_after=tuple((s, v) for _, s, v in stepped),
            scenario=scenario,
            phases=_phases(current, lines, killed_at, resumed_seen["at"]),
        )
