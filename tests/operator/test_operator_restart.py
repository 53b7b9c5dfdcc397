"""The operator process is SIGKILLed in the middle of a recovery (or is down when the fault
happens): the next one finishes the recovery with no duplicate gang, the same checkpoint
reference and one restart counted."""

from __future__ import annotations

from typing import Any

import pytest

from tests.operator.kit import OperatorEnv, job_doc, wait_for

pytestmark = pytest.mark.integration

CKPT = "/checkpoints/gpt/step-3000"


def _running_under_process(env: OperatorEnv, **policy: Any) -> list[dict[str, Any]]:
    env.start_process()
    env.create_job(job_doc("gpt", nodes=2, **policy))
    pods = env.wait_gang_running("gpt", 0, 2)
    env.wait_phase("gpt", "Running")
    env.report_checkpoint("gpt", CKPT, 3000)
    return pods


def _assert_recovered_once(env: OperatorEnv) -> None:
    pods = env.wait_gang_running("gpt", 1, 2)
    status = env.wait_phase("gpt", "Running")
    assert (status["attempt"], status["restarts"]) == (1, 1)
    assert status["resumeFrom"] == CKPT
    assert len(status["restartHistory"]) == 1
    for pod in pods:
        env_vars = {e["name"]: e.get("value", "") for e in pod["spec"]["containers"][0]["env"]}
        assert env_vars["TRAINMASTER_RESUME_FROM"] == CKPT
    assert [j["metadata"]["name"] for j in env.jobs("gpt")] == ["gpt-r1"]
    assert len(env.pods("gpt")) == 2
    assert len(env.events("Restarting")) == 1


def test_killed_during_the_restart_backoff(idle_env: OperatorEnv) -> None:
    env = idle_env
    pods = _running_under_process(env, backoffSeconds=12)
    env.fail_pod(pods[0]["metadata"]["name"], 1)
    wait_for(lambda: env.status("gpt").get("phase") == "Restarting", "the restart decision")
    env.kill_process()
    # Mid-recovery: the restart is recorded, the new gang does not exist yet.
    status = env.status("gpt")
    assert (status["attempt"], status["restarts"], status["resumeFrom"]) == (1, 1, CKPT)
    assert "gpt-r1" not in [j["metadata"]["name"] for j in env.jobs("gpt")]
    env.start_process()
    _assert_recovered_once(env)


def test_killed_as_soon_as_the_restart_is_recorded(idle_env: OperatorEnv) -> None:
    env = idle_env
    pods = _running_under_process(env)
    env.fail_pod(pods[1]["metadata"]["name"], 1)
    wait_for(lambda: env.status("gpt").get("attempt") == 1, "the restart decision", every=0.05)
    env.kill_process()
    env.start_process()
    _assert_recovered_once(env)


def test_a_fault_while_the_operator_is_down(idle_env: OperatorEnv) -> None:
    env = idle_env
    pods = _running_under_process(env)
    env.kill_process()
    env.fail_pod(pods[0]["metadata"]["name"], 1)
    wait_for(lambda: any(p["status"].get("phase") == "Failed" for p in env.pods("gpt", 0)),
             "the pod to fail")
    env.start_process()
    _assert_recovered_once(env)
