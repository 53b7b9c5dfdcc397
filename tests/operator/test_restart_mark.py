"""The operator's copy of the launcher's restart measure (status.lastRestart) to the gang's
PodGroup annotation the scheduler reads. The real API path: test_restart_cost_live."""

from __future__ import annotations

import asyncio
from typing import Any

from tests.operator.builders import make_job, make_state
from trainmaster.api import RESTART_ANNOTATION
from trainmaster.operator._gang import GangObjects


class PatchRecorder:
    """Only the one call mark_restart makes: an in-memory stand-in for a unit test."""

    def __init__(self) -> None:
        self.patches: list[tuple[str, Any]] = []

    async def patch(self, path: str, body: Any) -> dict[str, Any]:
        self.patches.append((path, body))
        return {}


def test_the_launchers_restart_seconds_are_read_from_the_status() -> None:
    state = make_state(lastRestart={"seconds": 42.5, "attempt": 1, "time": "x"})
    assert state.last_restart_seconds == 42.5
    assert make_state(lastRestart={"seconds": 7, "attempt": 1}).last_restart_seconds == 7.0
    for bad in (None, {}, {"seconds": "soon"}, {"seconds": -1}, {"seconds": True}, "12"):
        assert make_state(lastRestart=bad).last_restart_seconds is None


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
