"""Elastic jobs in the decision table: a lost member with at least minNodes left shrinks
the gang (no restart), fewer left restart it whole, a member preempted above the minimum
is no restart either, and an elastic run ends when its ranks do."""

from __future__ import annotations

from typing import Any

from tests.operator.builders import at, make_gang_job, make_pod, running_state
from trainmaster.api import format_time
from trainmaster.operator import Action, Cause, NodeHealth, decide, gang_view
from trainmaster.operator._elastic import recorded_size, resize_patch, world_size
from trainmaster.spec import Job

SICK = {"node-2": NodeHealth("NotReady (NodeStatusUnknown)", fenced=False)}


def _job(low: int = 1, high: int = 3, nodes: int = 3, **policy: Any) -> Job:
    return Job.model_validate({
        "name": "gpt", "image": "img:1", "launcher": "python", "nodes": nodes,
        "elastic": {"minNodes": low, "maxNodes": high},
        "restartPolicy": {"maxRestarts": 3, "backoffSeconds": 10, **policy},
    })


def _gang(*pods: dict[str, Any]) -> Any:
    return gang_view(0, list(pods), [make_gang_job(0)])


def _preempted(pod: dict[str, Any]) -> dict[str, Any]:
    pod["status"]["conditions"] = [{"type": "DisruptionTarget", "status": "True",
                                    "reason": "PreemptionByScheduler",
                                    "message": "trainmaster-scheduler: preempted by ns/big-r0"}]
    return pod


def test_a_member_on_a_lost_node_shrinks_the_gang_without_a_restart() -> None:
    gang = _gang(make_pod(0), make_pod(1), make_pod(2))
    decision = decide(_job(), running_state(), gang, SICK, at(5))
    assert decision.action is Action.SHRINK
    assert decision.sizes == (3, 2)
    assert decision.lost == ("gpt-r0-2-x",)
    assert decision.fault is not None and decision.fault.cause is Cause.NODE_UNHEALTHY
    assert decision.fault.nodes == ("node-2",)


def test_a_failed_member_shrinks_the_gang() -> None:
    gang = _gang(make_pod(0), make_pod(1), make_pod(2, "Failed", exit_code=137))
    decision = decide(_job(), running_state(), gang, {}, at(5))
    assert decision.action is Action.SHRINK
    assert decision.sizes == (3, 2) and decision.lost == ("gpt-r0-2-x",)
    assert decision.fault is not None and decision.fault.cause is Cause.POD_FAILED


def test_below_min_nodes_the_whole_gang_restarts() -> None:
    gang = _gang(make_pod(0), make_pod(1), make_pod(2))
    decision = decide(_job(low=3), running_state(), gang, SICK, at(5))
    assert decision.action is Action.RESTART
    assert decision.fault is not None and decision.fault.cause is Cause.NODE_UNHEALTHY


def test_a_rigid_job_still_restarts_on_node_loss() -> None:
    rigid = Job.model_validate({"name": "gpt", "image": "img:1", "launcher": "python",
                                "nodes": 3})
    gang = _gang(make_pod(0), make_pod(1), make_pod(2))
    assert decide(rigid, running_state(), gang, SICK, at(5)).action is Action.RESTART


def test_a_non_retryable_exit_still_fails_an_elastic_job() -> None:
    gang = _gang(make_pod(0), make_pod(1), make_pod(2, "Failed", exit_code=2))
    decision = decide(_job(retryableExitCodes=[137]), running_state(), gang, {}, at(5))
    assert decision.action is Action.FAIL


def test_a_member_preempted_above_the_minimum_is_no_restart() -> None:
    gang = _gang(make_pod(0), make_pod(1), _preempted(make_pod(2, deleting=True)))
    assert gang.preempted_by is not None
    assert decide(_job(), running_state(), gang, {}, at(5)).action is Action.OBSERVE
    # The same preemption of a gang at its minimum restarts it, as for a rigid gang.
    decision = decide(_job(low=3), running_state(), gang, {}, at(5))
    assert decision.action is Action.RESTART
    assert decision.fault is not None and decision.fault.cause is Cause.PREEMPTED


def test_an_elastic_run_ends_when_its_ranks_do_without_waiting_for_pending_members() -> None:
    gang = _gang(make_pod(0, "Succeeded"), make_pod(1, "Succeeded"), make_pod(2, "Pending"))
    assert decide(_job(), running_state(), gang, {}, at(5)).action is Action.SUCCEED
    still = _gang(make_pod(0, "Succeeded"), make_pod(1), make_pod(2, "Pending"))
    assert decide(_job(), running_state(), still, {}, at(5)).action is Action.OBSERVE


def test_a_pending_replacement_is_no_fault() -> None:
    gang = _gang(make_pod(0), make_pod(1), make_pod(2, "Pending", unschedulable="no node"))
    assert decide(_job(), running_state(), gang, {}, at(5)).action is Action.OBSERVE


def test_world_size_counts_members_running_on_usable_nodes() -> None:
    gang = _gang(make_pod(0), make_pod(1), make_pod(2), make_pod(3, "Pending"))
    assert world_size(gang, {}) == 3
    assert world_size(gang, SICK) == 2


def test_resize_patch_records_the_change() -> None:
    state = running_state(elastic={"worldSize": 3, "resizes": 0})
    assert recorded_size(state) == 3
    patch = resize_patch(state, 3, 2, "NodeUnhealthy: node-2", at(5))
    assert patch == {"elastic": {"worldSize": 2, "resizes": 1, "lastResize": {
        "from": 3, "to": 2, "reason": "NodeUnhealthy: node-2", "time": format_time(at(5)),
        "attempt": 0}}}
    assert resize_patch(state, None, 3, "", at(5)) == {"elastic": {"worldSize": 3,
                                                                   "resizes": 0}}
