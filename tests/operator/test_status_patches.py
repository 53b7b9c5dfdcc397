"""Status patches and fencing patches, pure: what each transition writes."""

from __future__ import annotations

import json

from tests.operator.builders import at, make_gang_job, make_job, make_node, make_pod, running_state
from trainmaster.api import UNHEALTHY_TAINT, format_time
from trainmaster.operator import (
    FENCED_ANNOTATION,
    Action,
    Cause,
    Decision,
    Fault,
    fence_patch,
    gang_view,
    unfence_patch,
)
from trainmaster.operator._model import HISTORY_LIMIT
from trainmaster.operator._status import fail_patch, observe_patch, restart_patch

FAULT = Fault(Cause.POD_FAILED, "pod gpt-r0-1 exited with code 137 on node-1", ("node-1",),
              "gpt-r0-1", 137)


def test_a_restart_records_attempt_count_and_checkpoint_in_one_write() -> None:
    state = running_state(lastCheckpoint={"path": "/ckpt/step-90", "step": 90})
    patch = restart_patch(state, Decision(Action.RESTART, FAULT, backoff=20), at(100))
    assert (patch["attempt"], patch["restarts"], patch["phase"]) == (1, 1, "Restarting")
    assert patch["resumeFrom"] == "/ckpt/step-90"
    assert patch["restartAt"] == format_time(at(120))
    assert patch["runningSince"] is None
    assert patch["lastFailure"]["exitCode"] == 137
    assert patch["lastFailure"]["nodes"] == ["node-1"]
    (entry,) = patch["restartHistory"]
    assert (entry["restart"], entry["newAttempt"], entry["cause"]) == (1, 1, "PodFailed")


def test_without_a_new_checkpoint_the_previous_resume_point_is_kept() -> None:
    state = running_state(attempt=2, restarts=2, resumeFrom="/ckpt/step-10")
    patch = restart_patch(state, Decision(Action.RESTART, FAULT), at(1))
    assert patch["resumeFrom"] == "/ckpt/step-10"
    assert patch["restartAt"] is None


def test_a_spec_change_is_not_counted_and_the_history_is_capped() -> None:
    history = [{"restart": i} for i in range(HISTORY_LIMIT)]
    state = running_state(restarts=4, attempt=4, restartHistory=history)
    change = Fault(Cause.SPEC_CHANGED, "spec generation 1 -> 2")
    patch = restart_patch(state, Decision(Action.RESTART, change, counted=False), at(1))
    assert (patch["attempt"], patch["restarts"]) == (5, 4)
    assert "lastFailure" not in patch
    assert len(patch["restartHistory"]) == HISTORY_LIMIT
    assert patch["restartHistory"][-1]["cause"] == "SpecChanged"


def test_max_restarts_failure_names_the_last_cause() -> None:
    state = running_state(restarts=3)
    patch = fail_patch(state, make_job(maxRestarts=3),
                       Decision(Action.FAIL, FAULT, reason="MaxRestartsExceeded"), at(1))
    assert patch["phase"] == "Failed"
    failed = next(c for c in patch["conditions"] if c["type"] == "Failed")
    assert failed["reason"] == "MaxRestartsExceeded"
    assert "gave up after 3 restart(s)" in failed["message"]
    assert "exited with code 137" in failed["message"]


def test_observing_a_steady_gang_writes_nothing_the_second_time() -> None:
    job = make_job(nodes=2)
    gang = gang_view(0, [make_pod(0), make_pod(1)], [make_gang_job(0)])
    state = running_state(runningSince=None, phase="Pending")
    first = observe_patch(state, job, gang, at(1))
    assert first["phase"] == "Running" and first["nodes"] == ["node-0", "node-1"]
    assert first["runningSince"] == format_time(at(1))
    after = running_state(**{**state.status, **first})
    assert observe_patch(after, job, gang, at(2)) == {}


def test_a_pending_gang_says_why() -> None:
    job = make_job(nodes=2)
    gang = gang_view(0, [make_pod(0, "Pending", unschedulable="0/500 nodes are available"),
                         make_pod(1, "Pending")], [make_gang_job(0)])
    patch = observe_patch(running_state(runningSince=None, phase="Pending"), job, gang, at(1))
    assert patch["pendingReason"] == "unschedulable: 0/500 nodes are available"


def test_fencing_cordons_taints_and_records_then_is_a_no_op() -> None:
    node = make_node(labels={})
    node["spec"]["taints"] = [{"key": "other", "effect": "NoSchedule"}]
    patch = fence_patch(node, "NotReady (NodeStatusUnknown)", at(0))
    assert patch is not None
    assert patch["metadata"]["resourceVersion"] == "42"
    assert patch["spec"]["unschedulable"] is True
    assert [t["key"] for t in patch["spec"]["taints"]] == ["other", UNHEALTHY_TAINT]
    assert patch["spec"]["taints"][1]["value"] == "NotReady"
    record = json.loads(patch["metadata"]["annotations"][FENCED_ANNOTATION])
    assert record["cordoned"] is True
    fenced = {**node, "metadata": {**node["metadata"], "annotations": {
        FENCED_ANNOTATION: json.dumps(record)}}, "spec": {**node["spec"], **patch["spec"]}}
    assert fence_patch(fenced, "NotReady", at(1)) is None
    lift = unfence_patch(fenced)
    assert lift is not None
    assert lift["spec"] == {"taints": [{"key": "other", "effect": "NoSchedule"}],
                            "unschedulable": None}
    assert lift["metadata"]["annotations"] == {FENCED_ANNOTATION: None}


def test_unfencing_leaves_a_cordon_someone_else_set() -> None:
    node = make_node(cordoned=True)
    patch = fence_patch(node, "GPUHealthy=False", at(0))
    assert patch is not None
    record = json.loads(patch["metadata"]["annotations"][FENCED_ANNOTATION])
    assert record["cordoned"] is False
    fenced = {**node, "metadata": {**node["metadata"], "annotations": {
        FENCED_ANNOTATION: json.dumps(record)}}, "spec": {**node["spec"], **patch["spec"]}}
    lift = unfence_patch(fenced)
    assert lift is not None and "unschedulable" not in lift["spec"]


def test_a_hold_shows_the_last_warmup_failure_and_keeps_its_start_time() -> None:
    from trainmaster.operator._model import JobState
    from trainmaster.operator._status import held_since, hold_patch, warmup_timeout_patch

    first = at(0)
    state = JobState.from_body({"metadata": {"name": "j", "namespace": "ns"}, "status": {}})
    waiting = hold_patch(state, "dataset wiki warm on 0 of 2 nodes", first)
    state = JobState.from_body({"metadata": {"name": "j", "namespace": "ns"},
                                "status": waiting})
    later = at(30)
    failed = hold_patch(state, "dataset wiki warm on 0 of 2 nodes", later,
                        "warm-up of dataset wiki failed on node n1 (pod p): boom")
    cond = next(c for c in failed["conditions"] if c["type"] == "DatasetsReady")
    assert cond["reason"] == "WarmupFailed" and cond["message"].endswith("(pod p): boom")
    assert cond["lastTransitionTime"] == format_time(first)  # still held since the first
    assert "pendingReason" not in failed  # unchanged
    state = JobState.from_body({"metadata": {"name": "j", "namespace": "ns"},
                                "status": {**waiting, **failed}})
    assert held_since(state, at(99)) == first
    timed_out = warmup_timeout_patch(state, "held 120 min", at(7200))
    assert timed_out["phase"] == "Failed"
    failed_cond = next(c for c in timed_out["conditions"] if c["type"] == "Failed")
    assert failed_cond["reason"] == "WarmupTimeout" and failed_cond["message"] == "held 120 min"
