"""When a restarted attempt's gang is created and which checkpoint it resumes from: after
the old gang has stopped (bounded), from the newest checkpoint reported by then."""

from __future__ import annotations

from typing import Any

from tests.operator.builders import at, make_pod, make_state
from trainmaster.api import format_time
from trainmaster.operator import NodeHealth, gang_view
from trainmaster.operator._decide import DRAIN_GRACE_SECONDS, old_gang_wait
from trainmaster.operator._status import resume_patch

OLD_CKPT = {"path": "/ckpt/step-220", "step": 220, "time": format_time(at(0))}
NEW_CKPT = {"path": "/ckpt/step-240", "step": 240, "time": format_time(at(5))}
SICK = {"node-1": NodeHealth("NotReady (NodeStatusUnknown)", fenced=False)}


def _restarting(**status: Any) -> dict[str, Any]:
    entry = {"cause": "PodFailed", "time": format_time(at(0)), "attempt": 0,
             "newAttempt": 1, "restart": 1, "resumeFrom": "/ckpt/step-220"}
    return {"phase": "Restarting", "attempt": 1, "restarts": 1, "gangGeneration": 1,
            "resumeFrom": "/ckpt/step-220", "restartHistory": [entry], **status}


def test_the_new_gang_waits_for_old_pods_still_in_their_grace_period() -> None:
    # Attempt 1 has no Job yet; attempt 0's pods are being deleted but still running.
    gang = gang_view(1, [make_pod(0, deleting=True), make_pod(1, deleting=True)], [])
    assert len(gang.draining) == 2
    assert old_gang_wait(gang, {}, at(0), at(10)) == DRAIN_GRACE_SECONDS - 10


def test_old_pods_not_yet_deleted_are_waited_for_too() -> None:
    gang = gang_view(1, [make_pod(0)], [])
    assert old_gang_wait(gang, {}, at(0), at(1)) == DRAIN_GRACE_SECONDS - 1


def test_the_wait_is_bounded_by_the_grace_from_the_restart() -> None:
    gang = gang_view(1, [make_pod(0, deleting=True)], [])
    assert old_gang_wait(gang, {}, at(0), at(DRAIN_GRACE_SECONDS + 1)) is None


def test_pods_on_a_sick_node_are_not_waited_for() -> None:
    # Its kubelet may never confirm: the pod was force-deleted, waiting learns nothing.
    gang = gang_view(1, [make_pod(1, deleting=True)], [])
    assert old_gang_wait(gang, SICK, at(0), at(1)) is None


def test_finished_and_unscheduled_old_pods_are_not_waited_for() -> None:
    pods = [make_pod(0, "Failed", exit_code=137, deleting=True),
            make_pod(1, "Succeeded", deleting=True), make_pod(2, "Pending", deleting=True)]
    assert old_gang_wait(gang_view(1, pods, []), {}, at(0), at(1)) is None


def test_no_old_pods_means_no_wait() -> None:
    assert old_gang_wait(gang_view(1, [], []), {}, at(0), at(1)) is None


def test_a_checkpoint_reported_after_the_restart_moves_the_resume_point() -> None:
    state = make_state(**_restarting(lastCheckpoint=NEW_CKPT))
    patch = resume_patch(state)
    assert patch["resumeFrom"] == "/ckpt/step-240"
    assert patch["restartHistory"][-1]["resumeFrom"] == "/ckpt/step-240"
    assert patch["restartHistory"][-1]["cause"] == "PodFailed"


def test_no_newer_checkpoint_changes_nothing() -> None:
    assert resume_patch(make_state(**_restarting(lastCheckpoint=OLD_CKPT))) == {}
    assert resume_patch(make_state(**_restarting())) == {}
