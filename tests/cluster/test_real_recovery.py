"""The real training job on two real nodes, killed for real and resumed from its own
checkpoint (issue 11). The same code as `trainmaster demo` and `bench recovery --real`
(trainmaster.drill): stacks/dev with its controllers and the CPU job examples/data-parallel
on the real nodes, the image built (cached) and loaded, the checkpoint volume a host folder.

- the job's pods were placed by the in-cluster trainmaster-scheduler on the real nodes, and
  Multus attached each to every rail and the storage network (its network-status);
- a SIGKILL to one rank's training process, and then to its container through containerd:
  each time the operator restarts the gang, rank 0 logs that it resumed at the newest
  checkpoint on disk, and every rank trains past it;
- `trainmaster ui` in chromium: the job's step rises on its open page, and a kill shows on
  its recovery timeline before it trains again; the in-cluster UI (`ui.enabled`) runs as
  a pod on a real node under its read-only ServiceAccount and serves the job (issue 29).
"""

from __future__ import annotations

import contextlib
import json
import subprocess
import sys
import time
import urllib.request
from collections.abc import Iterator
from ipaddress import ip_address, ip_network
from pathlib import Path
from typing import Any

import pytest

from tests.cluster.realkit import dev_stack
from tests.ui.browser import browser, live, needs_browser, serving_ui, shot, text
from trainmaster.api import JOB_LABEL
from trainmaster.drill import RealStack, run_drill
from trainmaster.kubeclient import SyncKube, api_path, pod_path
from trainmaster.objects import UI_PORT, ui_name
from trainmaster.polling import wait_until

pytestmark = [pytest.mark.integration, pytest.mark.realnode, pytest.mark.image]
__all__ = ["browser"]  # a fixture

ROOT = Path(__file__).resolve().parents[2]
NETWORK_STATUS = "k8s.v1.cni.cncf.io/network-status"


def _log(line: str) -> None:
    print(line, flush=True)


@pytest.fixture(scope="module")
def stack(trainmaster_home: Path, tmp_path_factory: pytest.TempPathFactory
          ) -> Iterator[RealStack]:
    def edit(doc: dict[str, Any]) -> None:
        doc["ui"] = {"enabled": True}  # the in-cluster UI runs on the real nodes too

    with dev_stack("drill", 2, tmp_path_factory.mktemp("drill"), edit) as real:
        yield real


def test_the_job_trains_on_the_real_nodes_placed_by_the_in_cluster_scheduler(
    stack: RealStack,
) -> None:
    result = run_drill(stack, "process-kill", _log)
    assert result.killed.node in stack.record.real_nodes
    assert "train.py" in result.killed.what
    assert result.last_checkpoint_step is not None and result.last_checkpoint_step > 0
    assert result.resumed_step == result.last_checkpoint_step, result
    assert result.resumed_from.endswith(f"/step-{result.last_checkpoint_step}"), result
    assert result.steps_after > result.resumed_step
    assert 0 <= result.lost_steps < 2 * 20 + 5, result  # checkpointEvery 20, a few in flight
    assert 0 < result.detect_seconds < result.recover_seconds
    with SyncKube.connect(stack.kubeconfig) as kube:
        pods = kube.list(api_path("v1", "pods", stack.namespace), f"{JOB_LABEL}={stack.job.name}")
        running = [p for p in pods if (p.get("status") or {}).get("phase") == "Running"]
        assert {p["spec"]["nodeName"] for p in running} <= set(stack.record.real_nodes)
        assert all(p["spec"]["schedulerName"] == stack.spec.scheduler.name for p in running)
        # Multus attached each rank to every rail and the storage network, as its networks
        # annotation asks, with addresses of the spec's subnets (its network-status).
        spec_networks = stack.spec.networks
        assert spec_networks.storage is not None
        subnets = [*(r.subnet for r in spec_networks.compute.rails),
                   spec_networks.storage.subnet]
        assert running
        for pod in running:
            status = json.loads(pod["metadata"]["annotations"][NETWORK_STATUS])
            attached = [s for s in status if not s.get("default")]
            assert [s["interface"] for s in attached] == [
                *(f"net{i + 1}" for i in range(len(subnets) - 1)), "storage0"], status
            for entry, subnet in zip(attached, subnets, strict=True):
                assert [ip_address(a) in ip_network(subnet) for a in entry["ips"]] == [True]
        # The binding was the in-cluster scheduler's: its PodGroup's Scheduled event.
        events = kube.list(api_path("v1", "events", stack.namespace))
        scheduled = [e for e in events if e.get("reason") == "Scheduled"
                     and e["involvedObject"]["kind"] == "PodGroup"
                     and e["involvedObject"]["name"].startswith(stack.job.name)]
        assert scheduled, "no Scheduled event on the job's PodGroups"
        assert {(e.get("source") or {}).get("component") or e.get("reportingComponent")
                for e in scheduled} == {stack.spec.scheduler.name}
    # The checkpoints really are files the job wrote in the shared volume.
    assert (stack.checkpoints / f"step-{result.last_checkpoint_step}" / "weights.npy").exists() \
        or result.last_checkpoint_step < max(
            int(p.name.split("-")[1]) for p in stack.checkpoints.glob("step-*")
            if p.name.split("-")[1].isdigit())


def test_a_killed_container_resumes_from_the_last_checkpoint(stack: RealStack) -> None:
    newest = max(int(p.name.split("-")[1]) for p in stack.checkpoints.glob("step-*")
                 if p.name.split("-")[1].isdigit())
    result = run_drill(stack, "container-kill", _log, after_checkpoint=newest)
    assert result.last_checkpoint_step is not None and result.last_checkpoint_step > newest
    assert result.killed.what.startswith("container ")
    assert result.resumed_step == result.last_checkpoint_step, result
    assert result.steps_after > result.resumed_step
    assert result.ok


def _step(driver: Any) -> int | None:
    value = text(driver, "#step")
    return int(value) if value.isdigit() else None


def _rises_past(driver: Any, step: int, timeout: float) -> int:
    """The job page's step once it is past ``step``, without a reload of the page."""
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        with contextlib.suppress(Exception):  # the fragment is being swapped in
            now = _step(driver)
            if now is not None and now > step:
                return now
        time.sleep(0.2)
    raise AssertionError(f"the step stayed at or below {step}: {text(driver, 'main')[:800]}")


@needs_browser
def test_the_ui_shows_the_real_job_training_and_its_recovery(
    stack: RealStack, browser: Any, tmp_path: Path,
) -> None:
    """`trainmaster ui` in chromium on this cluster of real nodes: dp-example's step rises
    on its open page (pushed by the server: the page is never reloaded), the rank killed
    for real appears on its recovery timeline with the step it resumed from, and the job
    trains again past it. Screenshots for docs/ui.md."""
    job, ns = stack.job.name, stack.namespace
    # The in-cluster UI (`ui.enabled`): Ready on a real node under its own read-only
    # ServiceAccount (its readiness probe answers once it has listed everything with
    # those rights), and serving the job from its pod's IP.
    with SyncKube.connect(stack.kubeconfig) as kube:
        def ready_ui() -> dict[str, Any] | None:
            pods = kube.list(pod_path(f"{ns}-system"), "app.kubernetes.io/name=trainmaster-ui")
            return next((p for p in pods if any(
                c.get("type") == "Ready" and c.get("status") == "True"
                for c in (p.get("status") or {}).get("conditions") or [])), None)

        pod = wait_until(ready_ui, "the in-cluster UI to be Ready", 300, 1)
    assert pod["spec"]["nodeName"] in stack.record.real_nodes
    assert pod["spec"]["serviceAccountName"] == ui_name(stack.spec)
    with urllib.request.urlopen(f"http://{pod['status']['podIP']}:{UI_PORT}/jobs",
                                timeout=60) as response:
        assert f"{ns}/{job}" in response.read().decode()
    _log(f"the in-cluster UI serves /jobs on {pod['spec']['nodeName']}")

    with serving_ui(stack.kubeconfig, tmp_path / "ui.log") as url:
        browser.get(f"{url}/jobs")
        live(browser, f"#job-{ns}-{job}", "Running", timeout=180)
        browser.get(f"{url}/jobs/{ns}/{job}")
        origin = browser.execute_script("return window.performance.timeOrigin")
        first = _rises_past(browser, 0, timeout=180)
        second = _rises_past(browser, first, timeout=60)  # checkpoints every 20 steps
        _log(f"the open page showed step {first}, then {second}")
        attempt = int(text(browser, "#attempt"))
        shot(browser, "job-real-training")

        result = run_drill(stack, "process-kill", _log)
        row = f"{attempt} → {attempt + 1}"
        live(browser, "#timeline", row, timeout=60)
        live(browser, "#phase", "Running", timeout=60)
        timeline = [line for line in text(browser, "#timeline").splitlines()
                    if line.startswith(row)]
        assert timeline and str(result.resumed_step) in timeline[0], timeline
        # The work redone and the wait: from the checkpoint resumed from to the first one
        # past it.
        live(browser, "#timeline tbody tr:last-child td:last-child", "s", timeout=60)
        assert text(browser, "#timeline tbody tr:last-child td:last-child") not in ("0s", "-")
        resumed = _rises_past(browser, result.resumed_step or 0, timeout=120)
        _log(f"after the kill the page showed attempt {attempt + 1} at step {resumed}")
        assert text(browser, "#attempt") == str(attempt + 1)
        assert browser.execute_script("return window.performance.timeOrigin") == origin
        shot(browser, "job-real")

        browser.get(f"{url}/jobs")
        assert "Running" in text(browser, f"#job-{ns}-{job}")
        shot(browser, "jobs-real")
        _other_views(stack, browser, url)


def _other_views(stack: RealStack, browser: Any, url: str) -> None:
    """Topology, queues and why pending on the real cluster, as a person checks them:
    the running gang named on the real node that runs it, each queue's GPUs in use as
    `trainmaster status` counts them, and a gang that can never fit held back with the
    scheduler's own reason and the placement code's counterfactual."""
    import json

    from trainmaster.api import POD_GROUP_LABEL, topology_label
    from trainmaster.kubeclient import podgroup_path, trainingjob_path

    job, ns = stack.job.name, stack.namespace
    with SyncKube.connect(stack.kubeconfig) as kube:
        gang = kube.get(trainingjob_path(ns, job))["status"]["gang"]
        ranks = kube.list(pod_path(ns), f"{JOB_LABEL}={job}")
        node = kube.get(f"/api/v1/nodes/{ranks[0]['spec']['nodeName']}")
    leaf = node["metadata"]["labels"][topology_label("leaf")]
    browser.get(f"{url}/topology/{leaf}")
    live(browser, f"#node-{node['metadata']['name']}", f"{ns}/{gang}", timeout=30)
    shot(browser, "leaf-real")

    status = subprocess.run(
        [sys.executable, "-m", "trainmaster", "status", "--kubeconfig", str(stack.kubeconfig),
         "--json", "--prometheus", "off"], capture_output=True, text=True, timeout=120)
    assert status.returncode == 0, status.stderr
    browser.get(f"{url}/queues")
    for queue in json.loads(status.stdout)["queues"]:
        live(browser, f"#queue-{queue['name']} .in-use", str(queue["in_use"]), timeout=30)
    shot(browser, "queues-real")

    # Two pods of 16 GPUs on nodes of 8: the in-cluster scheduler holds the gang back
    # (no preemption can help either), and the page says why and what would not help.
    held = "held-back"
    with SyncKube.connect(stack.kubeconfig) as kube:
        kube.post(podgroup_path(ns), {
            "apiVersion": "scheduling.x-k8s.io/v1alpha1", "kind": "PodGroup",
            "metadata": {"name": held, "namespace": ns}, "spec": {"minMember": 2}})
        for i in range(2):
            kube.post(pod_path(ns), {
                "apiVersion": "v1", "kind": "Pod",
                "metadata": {"name": f"{held}-{i}", "namespace": ns,
                             "labels": {POD_GROUP_LABEL: held}},
                "spec": {"schedulerName": "trainmaster-scheduler", "containers": [{
                    "name": "c", "image": "busybox",
                    "resources": {"requests": {"nvidia.com/gpu": "16"},
                                  "limits": {"nvidia.com/gpu": "16"}}}]}})
        try:
            browser.get(f"{url}/pending")
            row = f"#why-{ns}-{held}"
            live(browser, f"{row} .now", "cannot fit even with every scheduled pod gone",
                 timeout=60)
            live(browser, f"{row} .counterfactual",
                 "does not fit even with every running job gone", timeout=60)
            # The scheduler's own answer replaces "waiting for the scheduler".
            deadline = time.monotonic() + 60
            while "waiting for the scheduler" in text(browser, f"{row} .reason"):
                assert time.monotonic() < deadline, text(browser, f"{row} .reason")
                time.sleep(0.5)
            assert text(browser, f"{row} .reason").strip()
            shot(browser, "pending-real")
        finally:
            for i in range(2):
                kube.delete(pod_path(ns, f"{held}-{i}"))
            kube.delete(podgroup_path(ns, held))
