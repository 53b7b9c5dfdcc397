"""`trainmaster ui` in a real browser (Debian's chromium through chromium-driver) against
the real local control plane with kwok nodes, the operator and the demo-like jobs:
what a person would see, checked on the page, and a screenshot of each view for
docs/ui.md."""

from __future__ import annotations

import json
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from tests.operator.kit import OperatorEnv, job_doc
from tests.ui.browser import browser, live, needs_browser, serving_ui, shot, text
from trainmaster.cli import main

__all__ = ["browser"]  # a fixture



@pytest.fixture()
def ui_url(env: OperatorEnv, tmp_path: Path) -> Iterator[str]:
    with serving_ui(env.kubeconfig, tmp_path / "ui.log") as url:
        yield url


def _held_back_gang(env: OperatorEnv, name: str, pods: int, gpus: int) -> None:
    from trainmaster.kubeclient import pod_path, podgroup_path

    ns = env.namespace
    env.kube.post(podgroup_path(ns), {
        "apiVersion": "scheduling.x-k8s.io/v1alpha1", "kind": "PodGroup",
        "metadata": {"name": name, "namespace": ns}, "spec": {"minMember": pods}})
    for i in range(pods):
        env.kube.post(pod_path(ns), {
            "apiVersion": "v1", "kind": "Pod",
            "metadata": {"name": f"{name}-{i}", "namespace": ns,
                         "labels": {"scheduling.x-k8s.io/pod-group": name}},
            "spec": {"schedulerName": "trainmaster-scheduler", "containers": [{
                "name": "c", "image": "busybox",
                "resources": {"requests": {"nvidia.com/gpu": str(gpus)},
                              "limits": {"nvidia.com/gpu": str(gpus)}}}]}})


@needs_browser
@pytest.mark.integration
def test_views_in_chromium(env: OperatorEnv, ui_url: str, browser: Any,
                           capsys: pytest.CaptureFixture[str]) -> None:
    env.create_job(job_doc("gpt", nodes=2))
    pods = env.wait_gang_running("gpt", 0, 2)
    env.wait_phase("gpt", "Running")
    env.report_checkpoint("gpt", "/checkpoints/gpt/step-400", 400)
    # A held-back gang: a bare PodGroup whose two pods ask for 16 GPUs each on 8-GPU
    # nodes, for trainmaster-scheduler (which this cluster does not run: kube-scheduler
    # binds the tests' gangs, so nothing else touches them). The spec's checks would
    # refuse such a TrainingJob; a PodGroup of anyone's is not checked.
    _held_back_gang(env, "huge", pods=2, gpus=16)

    # Jobs: the step rises on the open page, pushed by the server (no reload).
    browser.get(f"{ui_url}/jobs/{env.namespace}/gpt")
    assert text(browser, "#step") == "400"
    marker = browser.execute_script("return window.performance.timeOrigin")
    # Checkpoint times are RFC 3339 seconds: two reports within one second give no rate
    # (a real job's checkpoints are minutes apart), so the second comes a second later.
    time.sleep(1.1)
    env.report_checkpoint("gpt", "/checkpoints/gpt/step-800", 800)
    took = live(browser, "#step", "800")
    assert took < 4.0, f"the step took {took:.1f}s to appear"
    assert browser.execute_script("return window.performance.timeOrigin") == marker
    assert text(browser, "#step-rate") != "-"

    # The kill: a pod dies, the operator restarts the gang; the timeline shows it.
    env.fail_pod(pods[0]["metadata"]["name"], 137)
    env.wait_gang_running("gpt", 1, 2)
    env.wait_phase("gpt", "Running")
    live(browser, "#timeline", "0 → 1", timeout=20)
    live(browser, "#phase", "Running", timeout=20)
    timeline = text(browser, "#timeline")
    assert "137" in timeline or "exit" in timeline.lower(), timeline
    shot(browser, "job")

    browser.get(f"{ui_url}/jobs")
    row = text(browser, f"#job-{env.namespace}-gpt")
    assert "Running" in row and "800" in row
    shot(browser, "jobs")

    # Queues: the UI's GPUs in use are `trainmaster status`'s.
    capsys.readouterr()
    assert main(["status", "--kubeconfig", str(env.kubeconfig), "--json"]) == 0
    status = json.loads(capsys.readouterr().out)
    browser.get(f"{ui_url}/queues")
    for q in status["queues"]:
        assert text(browser, f"#queue-{q['name']} .in-use") == str(q["in_use"])
    shot(browser, "queues")

    # Why pending: the operator's reason and a counterfactual from the placement code.
    browser.get(f"{ui_url}/pending")
    row = f"#why-{env.namespace}-huge"
    # Its reason (nobody has answered for it yet), then the placement code's own.
    assert "waiting for the scheduler" in text(browser, f"{row} .reason")
    assert "cannot fit even with every scheduled pod gone" in text(browser, f"{row} .now")
    # The counterfactual is searched after the table paints, and filled in.
    live(browser, f"{row} .counterfactual", "does not fit even with every running job gone",
          timeout=60)
    shot(browser, "pending")

    # Topology: the gang's leaf and node, with the gang named on its node.
    node = env.node(env.pods("gpt", 1)[0]["spec"]["nodeName"])
    leaf = node["metadata"]["labels"]["topology.trainmaster.io/leaf"]
    browser.get(f"{ui_url}/topology")
    assert text(browser, "#totals").split()[0].isdigit()
    shot(browser, "topology")
    browser.get(f"{ui_url}/topology/{leaf}")
    cell = text(browser, f"#node-{node['metadata']['name']}")
    assert f"{env.namespace}/gpt-r1" in cell
    shot(browser, "leaf")
