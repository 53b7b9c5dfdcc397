"""The monitoring stack on two real nodes (issue 26): the Prometheus operator, Prometheus and
Alertmanager built from Go modules and run as pods, configured only by the ServiceMonitors,
PodMonitor and PrometheusRule that trainmaster renders (`cluster up --monitoring`).

stacks/dev with its controllers and examples/data-parallel on the real nodes (as
`trainmaster demo`), then, against the live Prometheus and Alertmanager:

- the scheduler's replicas, the operator, the NIC agent of every real node and every rank of
  the training job are scraped and `up`, each on its pod IP; the NIC agents report their
  nodes' rail interfaces healthy;
- `trainmaster_job_step{trainingjob=...}` rises while the job trains;
- every dashboard panel's PromQL returns series (the DCGM panels need GPUs this host lacks:
  listed), and a wrong query fails the same check;
- a SIGKILL of one rank (the demo's fault) fires TrainingGangRestarted, which reaches
  Alertmanager; the time from the kill to firing is printed;
- a SIGSTOP of one rank's training process (the `hang` drill) fires TrainingNoProgress
  (noProgressMinutes 1 here), no sooner than the threshold.
"""

from __future__ import annotations

import json
import subprocess
import sys
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from tests.cluster.realkit import dev_stack
from trainmaster.api import JOB_LABEL
from trainmaster.cluster import ClusterError
from trainmaster.cluster._monitoring_api import Endpoints, Target, endpoints
from trainmaster.drill import RealStack, run_drill
from trainmaster.kubeclient import SyncKube, pod_path
from trainmaster.objects import all_objects, build_monitoring
from trainmaster.polling import wait_until
from trainmaster.status import PROMETHEUS, JobRow, collect_view

pytestmark = [pytest.mark.integration, pytest.mark.realnode, pytest.mark.image]

ROOT = Path(__file__).resolve().parents[2]
NEEDS_GPUS = "DCGM_FI_"
"""Panels on the DCGM exporter's series: no GPU, no exporter pod on the real nodes here."""


def _log(line: str) -> None:
    print(line, flush=True)


@pytest.fixture(scope="module")
def stack(trainmaster_home: Path, tmp_path_factory: pytest.TempPathFactory
          ) -> Iterator[RealStack]:
    def edit(doc: dict[str, Any]) -> None:
        # The stalled-job alert after 1 minute without progress (30 by default), so that
        # the hang drill fits in a test.
        alerts = doc.setdefault("monitoring", {}).setdefault("alerts", {})
        alerts["noProgressMinutes"] = 1

    with dev_stack("mon", 2, tmp_path_factory.mktemp("mon"), edit, monitoring=True) as real:
        yield real


@pytest.fixture(scope="module")
def api(stack: RealStack) -> Endpoints:
    ns = stack.spec.monitoring.scrape_namespace

    def found() -> Endpoints | None:
        try:
            api = endpoints(stack.kubeconfig, ns)
            api.prom("/api/v1/status/buildinfo")
            api.get(f"{api.alertmanager}/api/v2/status")
            return api
        except ClusterError as exc:
            _log(f"waiting for Prometheus and Alertmanager: {exc}")
            return None

    result: Endpoints = wait_until(found, timeout=300, every=3,
                                   what="Prometheus and Alertmanager to answer")
    return result


def _on_real_nodes(stack: RealStack) -> dict[tuple[str, str], str]:
    """(namespace, pod) -> pod IP, for every running pod on a real node."""
    with SyncKube.connect(stack.kubeconfig) as kube:
        pods = kube.list(pod_path())
    return {
        (p["metadata"]["namespace"], p["metadata"]["name"]): p["status"].get("podIP", "")
        for p in pods
        if p["spec"].get("nodeName") in stack.record.real_nodes
        and p["status"].get("phase") == "Running"
    }


def _pool(obj: dict[str, Any]) -> str:
    kind = {"ServiceMonitor": "serviceMonitor", "PodMonitor": "podMonitor"}[obj["kind"]]
    return f"{kind}/{obj['metadata']['namespace']}/{obj['metadata']['name']}/0"


def _rendered(stack: RealStack, kind: str) -> list[dict[str, Any]]:
    return [o for o in all_objects(stack.spec) if o["kind"] == kind]


def _series(api: Endpoints, expr: str) -> list[dict[str, Any]]:
    """A panel's check: its PromQL answers with at least one series."""
    found = api.query(expr)
    assert found, f"{expr}: no series"
    return found


def test_targets_are_up_on_pod_ips_and_the_step_rises(stack: RealStack, api: Endpoints
                                                      ) -> None:
    monitors = {_pool(o): o for o in _rendered(stack, "ServiceMonitor")
                + _rendered(stack, "PodMonitor")}
    scheduler = next(p for p, o in monitors.items()
                     if o["metadata"]["name"] == stack.spec.scheduler.name)
    operator = next(p for p, o in monitors.items()
                    if o["metadata"]["name"] == f"{stack.spec.metadata.name}-operator")
    training = next(p for p, o in monitors.items() if o["kind"] == "PodMonitor")
    nic = next(p for p, o in monitors.items()
               if o["metadata"]["name"] == f"{stack.spec.metadata.name}-nic-agent")
    job = stack.job.name

    def all_up() -> list[Target] | None:
        real = _on_real_nodes(stack)
        targets = [t for t in api.targets()
                   if (t.labels.get("namespace", ""), t.labels.get("pod", "")) in real]
        by_pool: dict[str, list[Target]] = {}
        for t in targets:
            by_pool.setdefault(t.pool, []).append(t)
        ranks = [t for t in by_pool.get(training, []) if t.labels["pod"].startswith(job)]
        with SyncKube.connect(stack.kubeconfig) as kube:
            pods = [p for p in kube.list(pod_path(stack.namespace), f"{JOB_LABEL}={job}")
                    if p["status"].get("phase") == "Running"]
        _log("targets on real nodes: " + ", ".join(
            f"{t.pool.split('/')[2]} {t.url} {t.health}" for t in targets))
        ok = (len([t for t in by_pool.get(scheduler, []) if t.health == "up"])
              == stack.spec.scheduler.replicas
              and [t.health for t in by_pool.get(operator, [])] == ["up"]
              # The NIC agent on every real node (the demo's placement), through its Service.
              and sorted(t.health for t in by_pool.get(nic, []))
              == ["up"] * len(stack.record.real_nodes)
              and len(ranks) == len(pods) > 0 and all(t.health == "up" for t in ranks))
        return targets if ok else None

    targets = wait_until(all_up, timeout=240, every=5,
                         what="the scheduler, operator and training targets to be up")
    real = _on_real_nodes(stack)
    for t in targets:
        # Scraped on its pod's IP (the operator's pod role), on the named metrics port.
        ip = real[(t.labels["namespace"], t.labels["pod"])]
        assert t.url.startswith(f"http://{ip}:"), t

    # No RDMA device here: each agent judges its node's rail interfaces on the stand-in
    # fabric (the node's trainmaster.io/nic-netdevs) and reports them healthy, so the
    # operator fences nothing.
    nics = {s["metric"]["node"]: (s["metric"]["reason"], float(s["value"][1]))
            for s in _series(api, "trainmaster_nic_healthy")}
    ports = {s["metric"]["node"]: float(s["value"][1])
             for s in _series(api, "trainmaster_nic_ports")}
    _log(f"NIC agents: {nics}; ports seen: {ports}")
    rails = len(stack.spec.networks.compute.rails)
    for node in stack.record.real_nodes:
        assert nics[node] == ("PortsActive", 1.0), nics
        assert ports[node] == rails, ports

    expr = f'max(trainmaster_job_step{{trainingjob="{job}"}})'
    first = float(_series(api, expr)[0]["value"][1])
    interval = stack.spec.monitoring.scrape_interval_seconds

    def rose() -> float | None:
        now = float(_series(api, expr)[0]["value"][1])
        return now if now > first else None

    later = wait_until(rose, timeout=6 * interval, every=2, what=f"{expr} to rise")
    _log(f"{expr}: {first:.0f} -> {later:.0f}")

    # `trainmaster status` finds the Prometheus pod and shows the job's live step rate and
    # time since its last checkpoint from it (and the UI's jobs view, through the same
    # trainmaster.status.job_progress).
    def live() -> JobRow | None:
        view = collect_view(stack.kubeconfig, stack.namespace)
        (row,) = [r for r in view.jobs if r.name == job]
        _log(f"status: {view.progress_note}; {job}: step {row.current_step}, "
             f"{row.step_rate} steps/s, checkpoint {row.checkpoint_age}s ago "
             f"({row.progress_from})")
        return row if row.progress_from == PROMETHEUS and row.step_rate else None

    row = wait_until(live, timeout=4 * interval, every=5, what="status to read Prometheus")
    assert row.step_rate is not None and 0 < row.step_rate < 1 / 0.25 + 0.5  # 0.25 s a step
    assert row.checkpoint_age is not None and row.checkpoint_age < 120
    assert row.current_step is not None and row.current_step >= later


def test_every_dashboard_panel_returns_series(stack: RealStack, api: Endpoints) -> None:
    (board,) = [o for o in build_monitoring(stack.spec) if o["kind"] == "ConfigMap"]
    panels = json.loads(board["data"]["trainmaster.json"])["panels"]
    needs_gpus = [p["title"] for p in panels if NEEDS_GPUS in p["targets"][0]["expr"]]
    checked = [p for p in panels if p["title"] not in needs_gpus]
    assert checked

    def answered() -> dict[str, int] | None:
        try:
            return {p["title"]: len(_series(api, p["targets"][0]["expr"])) for p in checked}
        except AssertionError as exc:
            _log(f"waiting: {exc}")
            return None

    counts = wait_until(answered, timeout=180, every=5, what="every panel to return series")
    _log(f"panels with series: {counts}; need GPUs (absent here): {needs_gpus}")
    # The check is not vacuous: a misspelt metric has no series, a syntax error is refused.
    with pytest.raises(AssertionError, match="no series"):
        _series(api, "max by (trainingjob) (trainmaster_job_stepz)")
    with pytest.raises(ClusterError, match=r"parse error|bad_data|400"):
        _series(api, "max by (trainingjob (trainmaster_job_step)")


def test_a_killed_rank_fires_the_restart_alert_into_alertmanager(
    stack: RealStack, api: Endpoints
) -> None:
    job = stack.job.name
    result = run_drill(stack, "process-kill", _log)
    assert result.ok, result

    def firing() -> float | None:
        for a in api.alerts():
            if (a["labels"]["alertname"], a["labels"].get("trainingjob"), a["state"]) == (
                    "TrainingGangRestarted", job, "firing"):
                return time.time()
        return None

    fired = wait_until(firing, timeout=180, every=1, what="TrainingGangRestarted to fire")

    def received() -> float | None:
        for a in api.received():
            if (a["labels"]["alertname"] == "TrainingGangRestarted"
                    and a["labels"].get("trainingjob") == job):
                return time.time()
        return None

    reached = wait_until(received, timeout=120, every=1,
                         what="TrainingGangRestarted to reach Alertmanager")
    _log(f"kill -> TrainingGangRestarted firing: {fired - result.killed_at:.1f}s; "
         f"in Alertmanager: {reached - result.killed_at:.1f}s "
         f"(scrape {stack.spec.monitoring.scrape_interval_seconds}s, evaluation 15s)")
    assert fired > result.killed_at

    # The alert history that `trainmaster cluster monitoring` prints (Prometheus' ALERTS):
    # the restart, from the first evaluation after the kill.
    history = [e for e in api.history(600) if e.alertname == "TrainingGangRestarted"
               and e.labels.get("trainingjob") == job]
    assert history and history[-1].start >= result.killed_at - 15, history
    shown = subprocess.run(
        [sys.executable, "-m", "trainmaster", "cluster", "monitoring", "--name",
         stack.record.name, "--since", "10"], capture_output=True, text=True, timeout=60)
    assert shown.returncode == 0, shown.stderr
    _log(shown.stdout)
    assert "alert history" in shown.stdout
    # It fires for the restart window (15 min): still firing in the history's row.
    assert [ln for ln in shown.stdout.splitlines()
            if "TrainingGangRestarted" in ln and "still firing" in ln], shown.stdout
    # Targets, with the NIC agents among them.
    assert f"{stack.spec.metadata.name}-nic-agent" in shown.stdout


def test_a_hung_rank_fires_the_stalled_job_alert(stack: RealStack, api: Endpoints) -> None:
    from trainmaster.drill._hang import run_hang

    result = run_hang(stack, api, _log)
    _log(f"SIGSTOP -> TrainingNoProgress firing: {result.fired_seconds:.1f}s "
         f"(threshold {result.threshold_seconds}s)")
    # Not before the threshold (less the few seconds between the last step and the stop:
    # the heartbeat is the last step's time), and within a few scrapes and evaluations of it.
    scrape = stack.spec.monitoring.scrape_interval_seconds
    assert result.threshold_seconds - 10 <= result.fired_seconds, result
    assert result.fired_seconds <= result.threshold_seconds + 2 * scrape + 2 * 15 + 10, result
