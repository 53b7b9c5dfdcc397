"""The decision table, pure: (job, status, live gang, node health, now) -> action."""

from __future__ import annotations

from typing import Any

import pytest

from tests.operator.builders import (
    T0,
    at,
    make_gang_job,
    make_job,
    make_node,
    make_pod,
    make_state,
    running_state,
)
from trainmaster.api import format_time
from trainmaster.operator import (
    Action,
    Cause,
    HealthRules,
    NodeHealth,
    backoff_seconds,
    decide,
    gang_view,
    node_health,
)

SICK = {"node-1": NodeHealth("NotReady (NodeStatusUnknown)", fenced=False)}


def _gang(*pods: dict[str, Any], job: dict[str, Any] | None = None, attempt: int = 0) -> Any:
    jobs = [job] if job is not None else [make_gang_job(attempt)]
    return gang_view(attempt, list(pods), jobs)


CASES = [
    # (id, job policy, status, pods, job, health, now, action, cause)
    ("new job starts", {}, {}, [], None, {}, T0, Action.START, None),
    ("healthy gang is observed", {}, "running", [make_pod(0), make_pod(1)], None, {}, at(5),
     Action.OBSERVE, None),
    ("retryable exit restarts", {}, "running",
     [make_pod(0, "Failed", exit_code=137), make_pod(1)], None, {}, at(5),
     Action.RESTART, Cause.POD_FAILED),
    ("exit code outside the list fails", {"retryableExitCodes": [137]}, "running",
     [make_pod(0, "Failed", exit_code=1), make_pod(1)], None, {}, at(5),
     Action.FAIL, Cause.POD_FAILED),
    ("one fatal exit among retryable ones fails", {"retryableExitCodes": [137]}, "running",
     [make_pod(0, "Failed", exit_code=137), make_pod(1, "Failed", exit_code=2)], None, {},
     at(5), Action.FAIL, Cause.POD_FAILED),
    ("evicted pod (no exit code) is retryable", {"retryableExitCodes": [137]}, "running",
     [make_pod(0, "Failed", reason="Evicted"), make_pod(1)], None, {}, at(5),
     Action.RESTART, Cause.POD_FAILED),
    ("sick node is blamed before its pod's failure", {}, "running",
     [make_pod(0), make_pod(1, "Failed", exit_code=1)], None, SICK, at(5),
     Action.RESTART, Cause.NODE_UNHEALTHY),
    ("a fenced node counts as sick", {}, "running", [make_pod(0), make_pod(1)], None,
     {"node-0": NodeHealth(None, fenced=True)}, at(5), Action.RESTART, Cause.NODE_UNHEALTHY),
    ("Job failed with no pod to blame", {}, "running", [make_pod(0)],
     make_gang_job(failed="a pod was deleted"), {}, at(5), Action.RESTART, Cause.GANG_FAILED),
    ("silence past the hang timeout restarts", {"hangTimeoutSeconds": 60}, "running",
     [make_pod(0), make_pod(1)], None, {}, at(61), Action.RESTART, Cause.HANG),
    ("a heartbeat keeps it alive", {"hangTimeoutSeconds": 60},
     {"lastHeartbeat": format_time(at(30))}, [make_pod(0), make_pod(1)], None, {}, at(61),
     Action.OBSERVE, None),
    ("a checkpoint counts as a heartbeat", {"hangTimeoutSeconds": 60},
     {"lastCheckpoint": {"path": "/c/1", "step": 1, "time": format_time(at(50))}},
     [make_pod(0), make_pod(1)], None, {}, at(100), Action.OBSERVE, None),
    ("no hang before the gang ever ran", {"hangTimeoutSeconds": 60},
     {"runningSince": None, "phase": "Pending"}, [make_pod(0, "Pending")], None, {}, at(999),
     Action.OBSERVE, None),
    ("max restarts reached fails", {"maxRestarts": 2}, {"restarts": 2, "attempt": 2},
     [make_pod(0, "Failed", exit_code=1, attempt=2)], make_gang_job(2), {}, at(5),
     Action.FAIL, Cause.POD_FAILED),
    ("backoff not over waits", {}, {"phase": "Restarting", "attempt": 1, "restarts": 1,
                                    "restartAt": format_time(at(30)), "runningSince": None},
     [], None, {}, at(10), Action.WAIT, None),
    ("backoff over: the gang is (re)created", {}, {"phase": "Restarting", "attempt": 1,
                                                   "restarts": 1, "runningSince": None,
                                                   "restartAt": format_time(at(30))},
     [], None, {}, at(31), Action.OBSERVE, None),
    ("all pods succeeded", {}, "running", [make_pod(0, "Succeeded"), make_pod(1, "Succeeded")],
     None, {}, at(5), Action.SUCCEED, None),
    ("terminal phases are final", {}, {"phase": "Succeeded"}, [], None, {}, at(5),
     Action.DONE, None),
]


@pytest.mark.parametrize(
    ("policy", "status", "pods", "job", "health", "now", "action", "cause"),
    [c[1:] for c in CASES], ids=[c[0] for c in CASES])
def test_decide(policy: dict[str, Any], status: Any, pods: list[dict[str, Any]],
                job: dict[str, Any] | None, health: dict[str, NodeHealth], now: Any,
                action: Action, cause: Cause | None) -> None:
    state = running_state() if status == "running" else (
        running_state(**status) if status else make_state())
    attempt = state.attempt
    decision = decide(make_job(**policy), state, _gang(*pods, job=job, attempt=attempt)
                      if job is not None or pods else gang_view(attempt, [], []), health, now)
    assert decision.action is action
    assert (decision.fault.cause if decision.fault else None) == cause


def test_a_spec_change_rolls_a_new_gang_without_counting_a_restart() -> None:
    state = running_state(gangGeneration=1)
    state = type(state)(**{**state.__dict__, "generation": 2})
    decision = decide(make_job(), state, _gang(make_pod(0), make_pod(1)), {}, at(1))
    assert decision.action is Action.RESTART
    assert decision.fault is not None and decision.fault.cause is Cause.SPEC_CHANGED
    assert decision.counted is False and decision.backoff == 0


def test_the_first_restart_waits_backoff_seconds_then_doubles_up_to_ten_minutes() -> None:
    job = make_job(backoffSeconds=30)
    assert [backoff_seconds(job, n) for n in range(7)] == [30, 60, 120, 240, 480, 600, 600]
    assert backoff_seconds(make_job(backoffSeconds=0), 5) == 0


def test_the_hang_deadline_is_when_the_job_next_needs_a_look() -> None:
    decision = decide(make_job(hangTimeoutSeconds=60), running_state(),
                      _gang(make_pod(0), make_pod(1)), {}, at(20))
    assert decision.wake_after == pytest.approx(40.5)


def test_pods_being_deleted_and_orphans_are_not_part_of_the_gang() -> None:
    gang = gang_view(1, [
        make_pod(0, attempt=1),
        make_pod(1, attempt=1, deleting=True),
        make_pod(1, attempt=1, owner="deleted-job"),
        make_pod(0, attempt=0),
    ], [make_gang_job(1), make_gang_job(0, uid="old")])
    assert [p.name for p in gang.pods] == ["gpt-r1-0-x"]
    assert sorted(p.name for p in gang.stale_pods) == ["gpt-r0-0-x", "gpt-r1-1-x"]
    assert gang.stale_jobs == ("gpt-r0",)


@pytest.mark.parametrize(("node", "problem", "fenced"), [
    (make_node(), None, False),
    (make_node(ready="False"), "NotReady (KubeletReady)", False),
    (make_node(ready="Unknown"), "NotReady (KubeletReady)", False),
    (make_node(conditions={"GPUHealthy": "False"}), "GPUHealthy=False (Agent)", False),
    (make_node(conditions={"NICHealthy": "False"}), "NICHealthy=False (Agent)", False),
    (make_node(conditions={"GPUHealthy": "True"}), None, False),
    (make_node(fenced=True), None, True),
], ids=["healthy", "not-ready", "unknown", "gpu", "nic", "gpu-ok", "fenced"])
def test_node_health(node: dict[str, Any], problem: str | None, fenced: bool) -> None:
    assert node_health(node, HealthRules()) == NodeHealth(problem, fenced)


def test_unhealthy_conditions_are_configurable() -> None:
    rules = HealthRules.parse(["XidErrors=True"])
    assert node_health(make_node(conditions={"XidErrors": "True"}), rules).problem
    assert node_health(make_node(conditions={"GPUHealthy": "False"}), rules).problem is None
    with pytest.raises(ValueError, match="TYPE=STATUS"):
        HealthRules.parse(["GPUHealthy"])


def _preempted(pod: dict[str, Any], by: str = "trainmaster-scheduler: preempted by ns/big-r0"
               ) -> dict[str, Any]:
    pod["status"].setdefault("conditions", []).append({
        "type": "DisruptionTarget", "status": "True", "reason": "PreemptionByScheduler",
        "message": by})
    return pod


def test_a_preempted_gang_restarts_at_once_without_spending_a_restart() -> None:
    # Even at maxRestarts, and even while the victims are already being deleted (and
    # failed), a preemption is a new gang from the last checkpoint, not a failure.
    state = running_state(restarts=3)
    pods = [_preempted(make_pod(0, deleting=True)), make_pod(1, phase="Failed", exit_code=137)]
    decision = decide(make_job(maxRestarts=3), state, _gang(*pods), {}, at(1))
    assert decision.action is Action.RESTART
    assert decision.fault is not None and decision.fault.cause is Cause.PREEMPTED
    assert "preempted by ns/big-r0" in decision.fault.message
    assert decision.counted is False and decision.backoff == 0
    assert decision.fault.nodes == ()  # no node is blamed (nor fenced)


def test_a_preemption_of_an_older_attempt_is_not_this_gangs_fault() -> None:
    gang = gang_view(1, [_preempted(make_pod(0, attempt=0, deleting=True)),
                         make_pod(0, attempt=1)], [make_gang_job(1)])
    assert gang.preempted_by is None
