"""On the real control plane: a checkpoint the old gang reports after the failure, while
its pods are still finishing, is the one the new gang resumes from."""

from __future__ import annotations

import time
from collections.abc import Iterator
from contextlib import contextmanager
from typing import Any

import pytest

from tests.operator.kit import OperatorEnv, job_doc, wait_for

pytestmark = pytest.mark.integration

HOLD = "trainmaster.test/hold"
"""A finalizer that keeps a deleted pod Running and present, like a trainer in its grace
period (kwok deletes pods at once otherwise)."""


def _env(pod: dict[str, Any]) -> dict[str, str]:
    return {e["name"]: e.get("value", "") for e in pod["spec"]["containers"][0]["env"]}


@contextmanager
def _held(env: OperatorEnv, pod: str) -> Iterator[None]:
    env.core.patch_namespaced_pod(pod, env.namespace, {"metadata": {"finalizers": [HOLD]}})
    try:
        yield
    finally:
        env.core.patch_namespaced_pod(pod, env.namespace, {"metadata": {"finalizers": None}})


def test_a_checkpoint_reported_while_the_old_gang_stops_is_resumed_from(
        env: OperatorEnv) -> None:
    env.create_job(job_doc("gpt", nodes=2))
    pods = env.wait_gang_running("gpt", 0, 2)
    env.wait_phase("gpt", "Running")
    env.report_checkpoint("gpt", "/checkpoints/gpt/step-220", 220)
    survivor, failing = (p["metadata"]["name"] for p in pods)
    with _held(env, survivor):
        env.fail_pod(failing, 137)
        status = wait_for(lambda: (s := env.status("gpt")).get("attempt") == 1 and s,
                          "the restart to be recorded")
        assert status["resumeFrom"] == "/checkpoints/gpt/step-220"  # chosen at the failure
        wait_for(lambda: env.core.read_namespaced_pod(survivor, env.namespace)
                 .metadata.deletion_timestamp, "the old gang's pod to be deleted")
        time.sleep(3)  # several looks of the operator while the old pod is still Running
        assert "gpt-r1" not in [j["metadata"]["name"] for j in env.jobs("gpt")], \
            "the new gang was created while the old one was still running"
        # The old gang's final checkpoint, in its grace period.
        env.report_checkpoint("gpt", "/checkpoints/gpt/step-240", 240)
    new = env.wait_gang_running("gpt", 1, 2)
    for pod in new:
        assert _env(pod)["TRAINMASTER_RESUME_FROM"] == "/checkpoints/gpt/step-240"
    status = env.wait_phase("gpt", "Running")
    assert (status["attempt"], status["restarts"]) == (1, 1)
    assert status["resumeFrom"] == "/checkpoints/gpt/step-240"
    assert status["restartHistory"][-1]["resumeFrom"] == "/checkpoints/gpt/step-240"


def test_a_checkpoint_reported_during_the_restart_backoff_is_resumed_from(
        env: OperatorEnv) -> None:
    env.create_job(job_doc("gpt", nodes=2, backoffSeconds=4))
    pods = env.wait_gang_running("gpt", 0, 2)
    env.wait_phase("gpt", "Running")
    env.report_checkpoint("gpt", "/checkpoints/gpt/step-220", 220)
    env.fail_pod(pods[0]["metadata"]["name"], 137)
    status = wait_for(lambda: (s := env.status("gpt")).get("attempt") == 1 and s,
                      "the restart to be recorded")
    assert status["restartAt"]
    env.report_checkpoint("gpt", "/checkpoints/gpt/step-240", 240)
    assert "gpt-r1" not in [j["metadata"]["name"] for j in env.jobs("gpt")]
    new = env.wait_gang_running("gpt", 1, 2)
    for pod in new:
        assert _env(pod)["TRAINMASTER_RESUME_FROM"] == "/checkpoints/gpt/step-240"
    assert env.wait_phase("gpt", "Running")["resumeFrom"] == "/checkpoints/gpt/step-240"


def test_a_gang_resumed_from_a_newer_checkpoint_on_disk_is_recorded_and_announced(
        env: OperatorEnv) -> None:
    """The launcher found a checkpoint on disk newer than TRAINMASTER_RESUME_FROM (one the
    old gang finished but never reported) and resumed from it: what its rank 0 reports
    reaches the status, and the operator posts a ResumedNewer Event naming it."""
    from datetime import UTC, datetime

    from trainmaster.launch import ApiSink

    env.create_job(job_doc("gpt", nodes=2))
    env.wait_gang_running("gpt", 0, 2)
    env.wait_phase("gpt", "Running")
    sink = ApiSink(env.namespace, "gpt", env.kubeconfig)
    try:
        # A report for an older attempt is not this gang's: no Event.
        assert sink.resumed("/checkpoints/gpt/step-100", 100, 7, datetime.now(UTC))
        time.sleep(2)
        assert not env.events("ResumedNewer")
        assert sink.resumed("/checkpoints/gpt/step-240", 240, 0, datetime.now(UTC))
        assert sink.checkpoint("/checkpoints/gpt/step-240", 240, datetime.now(UTC))
    finally:
        sink.close()
    (event,) = wait_for(lambda: env.events("ResumedNewer"), "the ResumedNewer Event")
    assert event["type"] == "Normal"
    assert "gang gpt-r0 resumed from /checkpoints/gpt/step-240 (step 240)" in event["message"]
    assert "newer than the start" in event["message"]
    status = env.status("gpt")
    assert status["lastCheckpoint"]["step"] == 240
    assert status["resumedFrom"]["path"] == "/checkpoints/gpt/step-240"
    time.sleep(2)  # further passes of the operator post it once
    assert len(env.events("ResumedNewer")) == 1
