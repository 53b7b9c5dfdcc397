"""The operator's copy of the launcher's restart measure (status.lastRestart) to the gang's
PodGroup annotation the scheduler reads. The real API path: test_restart_cost_live."""

from __future__ import annotations

import asyncio
from typing import Any

from tests.operator.builders import (
    at,
    make_gang_job,
    make_job,
    make_pod,
    make_state,
    running_state,
)
from trainmaster.api import RESTART_ANNOTATION, format_time
from trainmaster.operator import gang_view
from trainmaster.operator._gang import GangObjects
from trainmaster.operator._status import observe_patch


class PatchRecorder:
    """Only the one call mark_restart makes: an in-memory stand-in for a unit test."""

    def __init__(self) -> None:
        self.patches: list[tuple[str, Any]] = []

    async def patch(self, path: str, body: Any) -> dict[str, Any]:
        self.patches.append((path, body))
        return {}


def test_the_launchers_restart_seconds_are_read_from_the_status() -> None:
    state = make_state(lastRestart={"seconds": 42.5, "attempt": 1, "time": "x"})
    assert state.restart_seconds == 42.5
    assert make_state(lastRestart={"seconds": 7, "attempt": 1}).restart_seconds == 7.0
    for bad in (None, {}, {"seconds": "soon"}, {"seconds": -1}, {"seconds": True}, "12"):
        assert make_state(lastRestart=bad).restart_seconds is None


def _started(pod: dict[str, Any], start: float, trainer: float) -> dict[str, Any]:
    """A Running pod the kubelet took up at `start` whose trainer started at `trainer`."""
    pod["status"]["startTime"] = format_time(at(start))
    pod["status"]["containerStatuses"] = [
        {"name": "launcher", "state": {"terminated": {"exitCode": 0}}},
        {"name": "trainer", "state": {"running": {"startedAt": format_time(at(trainer))}}}]
    return pod


def test_the_gang_first_running_records_its_rank_zero_pods_start() -> None:
    pods = [_started(make_pod(0, attempt=1), 10, 47), _started(make_pod(1, attempt=1), 10, 90)]
    gang = gang_view(1, pods, [make_gang_job(1)])
    state = running_state(attempt=1, runningSince=None, phase="Restarting")
    patch = observe_patch(state, make_job(nodes=2), gang, at(100))
    assert patch["podStart"] == {"attempt": 1, "seconds": 37.0}  # rank 0's, not rank 1's
    after = running_state(**{**state.status, **patch})
    assert "podStart" not in observe_patch(after, make_job(nodes=2), gang, at(101))
    unknown = gang_view(1, [make_pod(0, attempt=1), make_pod(1, attempt=1)], [make_gang_job(1)])
    assert "podStart" not in observe_patch(state, make_job(nodes=2), unknown, at(100))


def test_the_pods_start_is_added_only_to_the_same_attempts_launcher_figure() -> None:
    launcher = {"seconds": 42.5, "attempt": 1, "time": "x"}
    assert make_state(lastRestart=launcher, podStart={"attempt": 1, "seconds": 37.0}
                      ).restart_seconds == 79.5
    # The next attempt's pods started; its launcher has not reached a step yet.
    assert make_state(lastRestart=launcher, podStart={"attempt": 2, "seconds": 5.0}
                      ).restart_seconds == 42.5
    assert make_state(podStart={"attempt": 1, "seconds": 37.0}).restart_seconds is None


def test_the_restart_seconds_are_annotated_once_per_value_on_the_current_podgroup() -> None:
    kube = PatchRecorder()
    gang = GangObjects(kube)  # type: ignore[arg-type]

    async def marks() -> None:
        await gang.mark_restart("ns", make_job(), 1, 42.5)
        await gang.mark_restart("ns", make_job(), 1, 42.5)  # unchanged: no second write
        await gang.mark_restart("ns", make_job(), 2, 42.5)  # the next attempt's PodGroup
        await gang.mark_restart("ns", make_job(), 2, 61.0)

    asyncio.run(marks())
    assert [(path.rsplit("/", 1)[-1], body["metadata"]["annotations"][RESTART_ANNOTATION])
            for path, body in kube.patches] == [("gpt-r1", "42.5"), ("gpt-r2", "42.5"),
                                                ("gpt-r2", "61")]
