"""The README's main job: a local cluster from an example stack with trainmaster on it.

1. start (or reuse) the local control plane for the spec's topology;
2. apply the spec's objects (CRDs, networks, scheduler, operator config, TrainingJobs);
3. run trainmaster-scheduler and the operator as processes of that cluster
   (`cluster down` stops them with the rest);
4. wait until every TrainingJob's gang is Running, placed by trainmaster-scheduler;
5. report a checkpoint for one job, as its launcher would, then fail one of its pods with
   a retryable exit code, and wait for the operator to bring the whole gang back from
   that checkpoint.
"""

from __future__ import annotations

import sys
import time
from collections.abc import Callable
from dataclasses import dataclass
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import yaml

from trainmaster import cluster
from trainmaster.apply import apply_spec
from trainmaster.cluster import ClusterError
from trainmaster.kubeclient import SyncKube, pod_path, trainingjob_path
from trainmaster.launch import ApiSink
from trainmaster.objects import ATTEMPT_LABEL, JOB_LABEL, scheduler_config
from trainmaster.polling import WaitTimeout, wait_until
from trainmaster.spec import ClusterSpec, load_spec

Report = Callable[[str], None]
FAIL_LABEL = "pod-container-running-failed.stage.kwok.x-k8s.io"


@dataclass(frozen=True)
class RecoveryShown:
    job: str
    failed_pod: str
    seconds: float
    restarts: int
    resumed_from: str


def _jobs(kube: SyncKube, ns: str) -> list[dict[str, Any]]:
    return kube.list(trainingjob_path(ns))


def _wait(check: Callable[[], Any], what: str, timeout: float) -> Any:
    try:
        return wait_until(check, what, timeout, 0.5)
    except WaitTimeout:
        raise ClusterError(f"timed out after {timeout:.0f}s waiting for {what}") from None


def start_components(spec: ClusterSpec, spec_path: Path, state_dir: Path, kubeconfig: Path) -> None:
    """trainmaster-scheduler and the operator as processes recorded with the cluster."""
    config = state_dir / "scheduler.yaml"
    config.write_text(yaml.safe_dump(scheduler_config(spec), sort_keys=False))
    running = {p.name for p in (cluster.ClusterRecord.load(state_dir) or _none()).processes}
    if "trainmaster-scheduler" not in running:
        cluster.attach_process(
            state_dir,
            "trainmaster-scheduler",
            [
                sys.executable,
                "-m",
                "trainmaster.scheduler.cli",
                "--config",
                str(config),
                "--kubeconfig",
                str(kubeconfig),
                "--metrics-port",
                "0",
                "--lease-namespace",
                spec.metadata.namespace,
            ],
        )
    if "trainmaster-operator" not in running:
        cluster.attach_process(
            state_dir,
            "trainmaster-operator",
            [
                sys.executable,
                "-m",
                "trainmaster",
                "operator",
                "run",
                "--namespace",
                spec.metadata.namespace,
                "--spec",
                str(spec_path.resolve()),
                "--kubeconfig",
                str(kubeconfig),
            ],
        )


def _none() -> Any:
    raise ClusterError("the cluster record disappeared")


def wait_running(
    kube: SyncKube, ns: str, report: Report, timeout: float = 180
) -> list[dict[str, Any]]:
    def all_running() -> list[dict[str, Any]] | None:
        jobs = _jobs(kube, ns)
        phases = {j["metadata"]["name"]: (j.get("status") or {}).get("phase", "-") for j in jobs}
        report("jobs: " + ", ".join(f"{k} {v}" for k, v in sorted(phases.items())))
        return jobs if jobs and all(p == "Running" for p in phases.values()) else None

    jobs: list[dict[str, Any]] = _wait(all_running, "every TrainingJob to run", timeout)
    return jobs


def show_recovery(
    kubeconfig: Path, spec: ClusterSpec, report: Report, timeout: float = 180
) -> RecoveryShown:
    with SyncKube.connect(kubeconfig) as kube:
        return _show_recovery(kube, kubeconfig, spec, report, timeout)


def _show_recovery(
    kube: SyncKube, kubeconfig: Path, spec: ClusterSpec, report: Report, timeout: float
) -> RecoveryShown:
    ns = spec.metadata.namespace
    job = next(j for j in spec.jobs if j.checkpoint is not None)
    status = _jobs_by_name(kube, ns)[job.name].get("status") or {}
    restarts = int(status.get("restarts", 0))
    assert job.checkpoint is not None
    checkpoint = f"{job.checkpoint.path}/step-{1000 * (restarts + 1)}"
    report(f"{job.name}: reporting checkpoint {checkpoint}, as `trainmaster launch` would")
    sink = ApiSink(ns, job.name, kubeconfig)
    try:
        sink.checkpoint(checkpoint, 1000 * (restarts + 1), datetime.now(UTC))
    finally:
        sink.close()
    attempt = str(status.get("attempt", restarts))
    pods = kube.list(pod_path(ns), f"{JOB_LABEL}={job.name},{ATTEMPT_LABEL}={attempt}")
    victim = next(p for p in pods if (p.get("status") or {}).get("phase") == "Running")
    victim_name = victim["metadata"]["name"]
    report(f"{job.name}: failing pod {victim_name} with exit code 137")
    started = time.monotonic()
    kube.patch(
        pod_path(ns, victim_name),
        {
            "metadata": {
                "labels": {FAIL_LABEL: "true"},
                "annotations": {f"{FAIL_LABEL}/exit-code": "137", f"{FAIL_LABEL}/delay": "10ms"},
            }
        },
        "strategic",
    )

    def recovered() -> dict[str, Any] | None:
        st = _jobs_by_name(kube, ns)[job.name].get("status") or {}
        report(f"{job.name}: {st.get('phase', '-')}, restarts {st.get('restarts', 0)}")
        if int(st.get("restarts", 0)) > restarts and st.get("phase") == "Running":
            return st
        return None

    final = _wait(recovered, f"{job.name} to run again", timeout)
    new_pods = kube.list(pod_path(ns),
                         f"{JOB_LABEL}={job.name},{ATTEMPT_LABEL}={final.get('attempt')}")
    resumed = (
        next(
            (
                e.get("value", "")
                for e in new_pods[0]["spec"]["containers"][0].get("env") or []
                if e.get("name") == "TRAINMASTER_RESUME_FROM"
            ),
            "",
        )
        if new_pods
        else ""
    )
    return RecoveryShown(
        job.name,
        victim_name,
        time.monotonic() - started,
        int(final.get("restarts", 0)),
        resumed or "",
    )


def _jobs_by_name(kube: SyncKube, ns: str) -> dict[str, dict[str, Any]]:
    return {j["metadata"]["name"]: j for j in _jobs(kube, ns)}


def run_demo(spec_path: Path, report: Report) -> tuple[cluster.ClusterRecord, RecoveryShown]:
    spec = load_spec(spec_path)
    result = cluster.up(spec_path, report=report)
    record = result.record
    kubeconfig, state_dir = Path(record.kubeconfig), Path(record.state_dir)
    report("applying the spec's objects")
    apply_spec(kubeconfig, spec, report)
    report("starting trainmaster-scheduler and the operator")
    start_components(spec, spec_path, state_dir, kubeconfig)
    with SyncKube.connect(kubeconfig) as kube:
        wait_running(kube, spec.metadata.namespace, report)
    shown = show_recovery(kubeconfig, spec, report)
    return record, shown
