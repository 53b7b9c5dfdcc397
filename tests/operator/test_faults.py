"""Each fault on the real control plane, injected the way kwok or a health agent would:
the whole gang comes back from the latest checkpoint, or the job fails with the reason."""

from __future__ import annotations

from datetime import UTC, datetime
from typing import Any

import pytest

from tests.operator.kit import OperatorEnv, job_doc, wait_for
from trainmaster.api import UNHEALTHY_TAINT

pytestmark = pytest.mark.integration

CKPT = "/checkpoints/gpt/step-1200"


def _env(pod: dict[str, Any]) -> dict[str, str]:
    return {e["name"]: e.get("value", "") for e in pod["spec"]["containers"][0]["env"]}


def _running_with_checkpoint(env: OperatorEnv, **policy: Any) -> list[dict[str, Any]]:
    env.create_job(job_doc("gpt", nodes=2, **policy))
    pods = env.wait_gang_running("gpt", 0, 2)
    env.wait_phase("gpt", "Running")
    env.report_checkpoint("gpt", CKPT, 1200)
    return pods


def _assert_restarted_from_checkpoint(env: OperatorEnv, cause: str) -> dict[str, Any]:
    pods = env.wait_gang_running("gpt", 1, 2)
    status = env.wait_phase("gpt", "Running")
    assert (status["attempt"], status["restarts"]) == (1, 1)
    assert status["resumeFrom"] == CKPT
    assert status["lastFailure"]["cause"] == cause
    assert [h["cause"] for h in status["restartHistory"]] == [cause]
    for pod in pods:
        assert _env(pod)["TRAINMASTER_RESUME_FROM"] == CKPT
        assert _env(pod)["TRAINMASTER_RESTART"] == "1"
    assert [j["metadata"]["name"] for j in env.jobs("gpt")] == ["gpt-r1"]
    wait_for(lambda: not env.pods("gpt", 0), "the old gang's pods to be gone")
    (event,) = env.events("Restarting")
    assert cause in event["message"] and CKPT in event["message"]
    return status


def test_a_retryable_pod_failure_restarts_the_whole_gang(env: OperatorEnv) -> None:
    pods = _running_with_checkpoint(env)
    env.fail_pod(pods[1]["metadata"]["name"], 137)
    status = _assert_restarted_from_checkpoint(env, "PodFailed")
    assert status["lastFailure"]["exitCode"] == 137
    assert status["lastFailure"]["pod"] == pods[1]["metadata"]["name"]


def test_a_non_retryable_exit_code_fails_the_job_at_once(env: OperatorEnv) -> None:
    pods = _running_with_checkpoint(env, retryableExitCodes=[137])
    env.fail_pod(pods[0]["metadata"]["name"], 2)
    status = env.wait_phase("gpt", "Failed")
    assert status["restarts"] == 0
    failed = next(c for c in status["conditions"] if c["type"] == "Failed")
    assert failed["reason"] == "NonRetryableExitCode"
    assert "exited with code 2" in failed["message"]
    assert wait_for(lambda: env.events("Failed"), "the Failed Event")
    # The gang is stopped (its GPUs freed), its failed pod kept for the logs.
    wait_for(lambda: env.batch.read_namespaced_job("gpt-r0", env.namespace).spec.suspend,
             "the failed gang's Job to be suspended")
    wait_for(lambda: [p["status"]["phase"] for p in env.pods("gpt")] == ["Failed"],
             "only the failed pod to remain")


@pytest.mark.parametrize("fault", ["node-not-ready", "gpu-unhealthy"])
def test_a_sick_node_is_fenced_and_the_gang_moves_elsewhere(env: OperatorEnv,
                                                            fault: str) -> None:
    pods = _running_with_checkpoint(env)
    sick = pods[0]["spec"]["nodeName"]
    if fault == "node-not-ready":
        env.node_not_ready(sick)
    else:
        env.gpu_unhealthy(sick)
    status = _assert_restarted_from_checkpoint(env, "NodeUnhealthy")
    assert status["lastFailure"]["nodes"] == [sick]
    assert sick not in status["nodes"]
    node = env.node(sick)
    assert node["spec"]["unschedulable"] is True
    taint = next(t for t in node["spec"]["taints"] if t["key"] == UNHEALTHY_TAINT)
    assert taint["effect"] == "NoSchedule"
    fenced = [e for e in env.events("Fenced", namespace="default")
              if e["involvedObject"]["name"] == sick]
    assert fenced


def test_a_hang_restarts_the_gang(env: OperatorEnv) -> None:
    with env.heartbeats("gpt"):
        _running_with_checkpoint(env, hangTimeoutSeconds=10)
    # Heartbeats stop: the job hangs. After its restart it is alive again.
    wait_for(lambda: env.status("gpt").get("attempt") == 1, "a restart of the silent job")
    with env.heartbeats("gpt"):
        status = _assert_restarted_from_checkpoint(env, "Hang")
    assert "no heartbeat" in status["lastFailure"]["message"]


def test_restarts_stop_at_max_restarts_naming_the_last_cause(env: OperatorEnv) -> None:
    pods = _running_with_checkpoint(env, maxRestarts=1)
    env.fail_pod(pods[0]["metadata"]["name"], 1)
    pods = env.wait_gang_running("gpt", 1, 2)
    env.fail_pod(pods[1]["metadata"]["name"], 139)
    status = env.wait_phase("gpt", "Failed")
    assert status["restarts"] == 1
    failed = next(c for c in status["conditions"] if c["type"] == "Failed")
    assert failed["reason"] == "MaxRestartsExceeded"
    assert "exited with code 139" in failed["message"]
    assert len(env.events("Restarting")) == 1


def test_backoff_holds_the_new_gang_until_restart_at(env: OperatorEnv) -> None:
    pods = _running_with_checkpoint(env, backoffSeconds=6)
    env.fail_pod(pods[0]["metadata"]["name"], 1)
    status = env.wait_phase("gpt", "Restarting")
    restart_at = datetime.fromisoformat(status["restartAt"])
    assert restart_at > datetime.fromisoformat(status["lastFailure"]["time"])
    jobs = [j["metadata"]["name"] for j in env.jobs("gpt")]
    if datetime.now(UTC) < restart_at:  # (a very slow machine may already be past it)
        assert "gpt-r1" not in jobs
    _assert_restarted_from_checkpoint(env, "PodFailed")
