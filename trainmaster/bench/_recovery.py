"""`trainmaster bench recovery`: from a fault to the job's new gang running again.

Procedure, per scenario and repetition, on a TrainingJob of `gang` pods (8 GPUs each)
that is Running and has just reported a checkpoint (a new step every time):

    t0  inject the fault
        pod-failure        kwok's chaos stage fails one pod, exit code 1 (retryable)
        node-not-ready     kwok's chaos stage turns one gang node Ready=False
        missing-heartbeat  the simulated launcher stops reporting heartbeats
    detect   = first time the TrainingJob's status shows the next attempt
    recover  = first time every pod of that attempt is Running, none on the sick node,
               each with TRAINMASTER_RESUME_FROM = the reported checkpoint

Clocks are the benchmark's own (monotonic), polling the API every 0.1 s, so each number
carries up to ~0.1 s of polling delay. The operator runs as its own process; backoff is
0 (a backoff is a deliberate wait, not recovery time) and hangTimeoutSeconds is
--hang-timeout, which bounds the missing-heartbeat detection from below.

Baseline: the same pod template as a plain Indexed Job (backoffLimit 1000, no operator)
under the same pod-failure and node-not-ready faults, timed until all its pods Run again
on other than the sick node. It restarts only the failed index, with no resume
checkpoint; a real NCCL job's 15 other ranks would be stuck meanwhile. A missing
heartbeat has no baseline: nothing in Kubernetes watches for one.
"""

from __future__ import annotations

import contextlib
import threading
import time
from collections.abc import Callable
from dataclasses import dataclass
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

from trainmaster.api import ATTEMPT_LABEL, JOB_LABEL, RECOVERY_BASELINE_LABEL, RESUME_FROM_ENV
from trainmaster.bench._errors import BenchError
from trainmaster.bench._recovery_world import World, local_cluster
from trainmaster.kubeclient import api_path, job_path, pod_path, trainingjob_path
from trainmaster.objects import (
    build_gang_job,
    build_job_identity,
    build_launch_config,
    build_training_job,
    gang_name,
)
from trainmaster.polling import WaitTimeout, wait_until
from trainmaster.spec import Job

Report = Callable[[str], None]
SCENARIOS = ("pod-failure", "node-not-ready", "missing-heartbeat")
BASELINES = ("pod-failure", "node-not-ready")
JOB = "bench"
BASELINE_JOB = "baseline"
BASELINE_LABEL = RECOVERY_BASELINE_LABEL
POLL = 0.1




@dataclass(frozen=True)
class RecoveryOptions:
    kubeconfig: Path | None = None
    gang: int = 16
    spare: int = 8
    """Nodes beyond the gang in a cluster the benchmark starts (room to move to)."""
    repeat: int = 3
    scenarios: tuple[str, ...] = SCENARIOS
    baseline: bool = True
    hang_timeout: int = 10
    timeout: float = 120.0
    """Seconds a recovery may take before the run counts as failed."""
    baseline_timeout: float = 60.0

    def check(self) -> None:
        unknown = set(self.scenarios) - set(SCENARIOS)
        if unknown:
            raise BenchError(f"unknown scenario(s) {sorted(unknown)}; choose from {SCENARIOS}")
        if self.gang < 1 or self.repeat < 1 or self.hang_timeout < 10:
            raise BenchError("--gang and --repeat must be >= 1, --hang-timeout >= 10")


@dataclass(frozen=True)
class Row:
    scenario: str
    detect_seconds: float | None
    recover_seconds: float | None
    resumed_from: str | None
    ok: bool
    note: str = ""

    def to_json(self) -> dict[str, Any]:
        return {
            "scenario": self.scenario,
            "detect_seconds": _round(self.detect_seconds),
            "recover_seconds": _round(self.recover_seconds),
            "resumed_from": self.resumed_from,
            "ok": self.ok,
        }


def _round(value: float | None) -> float | None:
    return None if value is None else round(value, 2)


def _now() -> str:
    return datetime.now(UTC).isoformat(timespec="milliseconds").replace("+00:00", "Z")


def _resume(pod: dict[str, Any]) -> str:
    env = pod["spec"]["containers"][0].get("env") or []
    return next((e.get("value", "") for e in env if e["name"] == RESUME_FROM_ENV), "")


class Heartbeats:
    """The simulated launcher's heartbeat: a status patch every second until stopped."""

    def __init__(self, world: World) -> None:
        self._world = world
        self._stop = threading.Event()
        self._thread: threading.Thread | None = None

    def start(self) -> None:
        self._stop.clear()
        self._thread = threading.Thread(target=self._beat, daemon=True)
        self._thread.start()

    def stop(self) -> None:
        self._stop.set()
        if self._thread is not None:
            self._thread.join(10)
            self._thread = None

    def _beat(self) -> None:
        while not self._stop.is_set():
            with contextlib.suppress(Exception):
                _patch_status(self._world, {"lastHeartbeat": _now()})
            self._stop.wait(1.0)


def _patch_status(world: World, status: dict[str, Any]) -> None:
    world.kube.patch(trainingjob_path(world.namespace, JOB, "status"), {"status": status})


def _status(world: World) -> dict[str, Any]:
    return dict(world.kube.get(trainingjob_path(world.namespace, JOB)).get("status") or {})


def _pods(world: World, selector: str) -> list[dict[str, Any]]:
    pods = world.kube.list(pod_path(world.namespace), selector)
    return [p for p in pods if not p["metadata"].get("deletionTimestamp")]


def _all_running(pods: list[dict[str, Any]], count: int, bad: set[str]) -> bool:
    return len(pods) == count and all(
        p["status"].get("phase") == "Running" and p["spec"].get("nodeName") not in bad
        for p in pods)


def _running(world: World, selector: str, count: int) -> list[dict[str, Any]] | None:
    """The pods, when all ``count`` of them are Running."""
    pods = _pods(world, selector)
    return pods if _all_running(pods, count, set()) else None


def _inject(world: World, scenario: str, pod: dict[str, Any], beats: Heartbeats | None
            ) -> set[str]:
    """Start the fault; return the nodes it makes sick."""
    if scenario == "pod-failure":
        world.fail_pod(pod["metadata"]["name"], 1)
        return set()
    if scenario == "node-not-ready":
        node = pod["spec"]["nodeName"]
        world.node_not_ready(node)
        return {node}
    assert scenario == "missing-heartbeat" and beats is not None
    beats.stop()
    return set()


def _operator_run(world: World, options: RecoveryOptions, scenario: str, step: int,
                  beats: Heartbeats) -> Row:
    attempt = int(_status(world).get("attempt") or 0)
    selector = f"{JOB_LABEL}={JOB},{ATTEMPT_LABEL}={attempt}"
    pods = wait_until(lambda: _running(world, selector, options.gang),
                      f"gang {gang_name(JOB, attempt)} Running", options.timeout, 0.2)
    checkpoint = f"/checkpoints/{JOB}/step-{step}"
    _patch_status(world, {"lastCheckpoint": {"path": checkpoint, "step": step, "time": _now()}})
    wait_until(lambda: (_status(world).get("lastCheckpoint") or {}).get("path") == checkpoint,
               "the checkpoint report", 30, 0.2)
    victim = sorted(pods, key=lambda p: p["metadata"]["name"])[3 % len(pods)]
    start = time.monotonic()
    bad = _inject(world, scenario, victim, beats)
    detect = recover = None
    resumed: str | None = None
    while time.monotonic() - start < options.timeout:
        now_attempt = int(_status(world).get("attempt") or 0)
        elapsed = time.monotonic() - start
        if detect is None and now_attempt > attempt:
            detect = elapsed
        if detect is not None:
            new = _pods(world, f"{JOB_LABEL}={JOB},{ATTEMPT_LABEL}={now_attempt}")
            if _all_running(new, options.gang, bad) and \
                    {_resume(p) for p in new} == {checkpoint}:
                recover, resumed = time.monotonic() - start, checkpoint
                break
        time.sleep(POLL)
    if scenario == "missing-heartbeat":
        beats.start()
    for node in bad:
        world.heal_node(node)
    note = "" if recover is not None else f"not recovered within {options.timeout:.0f}s"
    return Row(scenario, detect, recover, resumed, recover is not None, note)


def _baseline_spec(job: Job) -> Job:
    """The benchmark's job under the baseline's own name: its pods run as their own
    ServiceAccount (``<name>-trainer``) with their own launch ConfigMap, as the gang's do."""
    return job.model_copy(update={"name": BASELINE_JOB})


def prepare_baseline(world: World, job: Job) -> None:
    """What the gang's pods get from the operator and the baseline's pods need too: the
    job's ServiceAccount (with its Role and RoleBinding) and its launch ConfigMap.

    The operator makes these for a TrainingJob and owns them through it, so they are
    garbage-collected once the benchmark deletes its TrainingJob before the baseline.
    Without its own, every baseline pod was refused by the ServiceAccount admission
    (``serviceaccount "bench-trainer" not found``): the Job controller created no pod and
    the baseline timed out waiting for its Job to run."""
    baseline = _baseline_spec(job)
    for obj in [*build_job_identity(world.spec, baseline), build_launch_config(world.spec,
                                                                               baseline)]:
        obj["metadata"].setdefault("labels", {})[BASELINE_LABEL] = "true"
        world.kube.apply(obj)


def _baseline_job(world: World, job: Job) -> dict[str, Any]:
    """The gang Job's pod template as a plain Indexed Job that retries failed indexes."""
    obj = build_gang_job(world.spec, _baseline_spec(job), 0)
    labels = {BASELINE_LABEL: "true"}
    obj["metadata"] = {"name": BASELINE_JOB, "namespace": world.namespace, "labels": labels}
    obj["spec"]["backoffLimit"] = 1000
    template = obj["spec"]["template"]
    template["metadata"]["labels"] = dict(labels)
    template["spec"]["subdomain"] = BASELINE_JOB
    return obj


def _job_trouble(world: World) -> str:
    """Why the baseline Job has no running pods, from its controller's warning Events."""
    events = world.kube.list(api_path("v1", "events", world.namespace))
    warnings = [f"{e.get('reason')}: {e.get('message')}" for e in events
                if e.get("type") == "Warning"
                and e["involvedObject"].get("name", "").startswith(BASELINE_JOB)]
    return "; ".join(dict.fromkeys(warnings)) or "no warning Event"


def _baseline_run(world: World, options: RecoveryOptions, scenario: str, job: Job) -> Row:
    world.kube.post(job_path(world.namespace), _baseline_job(world, job))
    selector = f"{BASELINE_LABEL}=true"
    try:
        try:
            pods = wait_until(lambda: _running(world, selector, options.gang),
                              "the baseline Job Running", options.timeout, 0.2)
        except WaitTimeout as exc:
            raise BenchError(f"{exc}; the baseline Job's Events: {_job_trouble(world)}"
                             ) from None
        before = {p["metadata"]["name"] for p in pods}
        victim = sorted(pods, key=lambda p: p["metadata"]["name"])[3 % len(pods)]
        start = time.monotonic()
        bad = _inject(world, scenario, victim, None)
        detect = recover = None
        while time.monotonic() - start < options.baseline_timeout:
            now = _pods(world, selector)
            if detect is None and any(p["metadata"]["name"] not in before for p in now):
                detect = time.monotonic() - start
            live = [p for p in now if p["status"].get("phase") not in ("Failed", "Succeeded")]
            if detect is not None and _all_running(live, options.gang, bad):
                recover = time.monotonic() - start
                break
            time.sleep(POLL)
        for node in bad:
            world.heal_node(node)
    finally:
        world.kube.delete(job_path(world.namespace, BASELINE_JOB), propagation="Background")
        wait_until(lambda: not _pods(world, selector), "the baseline's pods to go", 120, 0.2)
    note = "" if recover is not None else (
        f"not recovered within {options.baseline_timeout:.0f}s"
        + (" (pods tolerate a NotReady node for 300s by default)"
           if scenario == "node-not-ready" else ""))
    return Row(f"baseline/{scenario}", detect, recover, None, recover is not None, note)


def run_recovery_bench(options: RecoveryOptions, report: Report) -> list[Row]:
    options.check()
    rows: list[Row] = []
    nodes = options.gang + options.spare
    with local_cluster(nodes, options.kubeconfig, report) as kubeconfig:
        world = World(kubeconfig, nodes, report)
        beats = Heartbeats(world)
        try:
            world.setup()
            world.start_process()
            job = Job.model_validate({
                "name": JOB, "image": "nvcr.io/nvidia/pytorch:24.05-py3",
                "launcher": "torchrun", "nodes": options.gang, "gpusPerPod": 8,
                "command": ["python", "train.py"],
                "checkpoint": {"volume": "checkpoints", "path": f"/checkpoints/{JOB}"},
                "restartPolicy": {"maxRestarts": 1000, "backoffSeconds": 0,
                                  "hangTimeoutSeconds": options.hang_timeout},
            })
            world.kube.post(trainingjob_path(world.namespace),
                            build_training_job(world.spec, job))
            beats.start()
            step = 0
            for round_ in range(options.repeat):
                for scenario in options.scenarios:
                    step += 1000
                    report(f"[{round_ + 1}/{options.repeat}] operator: {scenario}")
                    row = _operator_run(world, options, scenario, step, beats)
                    report(f"  detect {row.detect_seconds}, recover {row.recover_seconds}")
                    rows.append(row)
                    if not world.operator_alive():
                        raise BenchError(f"the operator died; see {world.log}")
            beats.stop()
            if options.baseline:
                world.kube.delete(trainingjob_path(world.namespace, JOB))
                wait_until(lambda: not _pods(world, f"{JOB_LABEL}={JOB}"),
                           "the job's pods to go", 120, 0.2)
                prepare_baseline(world, job)
                for round_ in range(options.repeat):
                    for scenario in (s for s in options.scenarios if s in BASELINES):
                        report(f"[{round_ + 1}/{options.repeat}] baseline: {scenario}")
                        rows.append(_baseline_run(world, options, scenario, job))
        finally:
            beats.stop()
            world.close()
    return rows
