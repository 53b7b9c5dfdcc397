"""A preemption the operator saw on the pod watch still explains the gang's failure when the
next list no longer shows the marked pods (on a loaded API server they are deleted, the
rigid Job failed and its replacement pods created in between). The real API path:
test_preemption_live."""

from __future__ import annotations

import asyncio
from typing import Any

from tests.operator.builders import make_gang_job, make_job, make_pod
from trainmaster.api import DISRUPTION_TARGET, PREEMPTION_BY_SCHEDULER
from trainmaster.operator._gang import GangObjects


class ListAnswers:
    """Only the list calls observe makes: an in-memory stand-in for a unit test."""

    def __init__(self, pods: list[dict[str, Any]], jobs: list[dict[str, Any]]) -> None:
        self.answers = {"pods": pods, "jobs": jobs}

    async def list(self, path: str, selector: str) -> list[dict[str, Any]]:
        return self.answers["pods" if path.endswith("/pods") else "jobs"]


def _preempted(pod: dict[str, Any]) -> dict[str, Any]:
    pod["metadata"]["namespace"] = "ns"
    pod["status"]["conditions"] = [{"type": DISRUPTION_TARGET, "status": "True",
                                    "reason": PREEMPTION_BY_SCHEDULER,
                                    "message": "sched: preempted by ns/urgent-r0"}]
    return pod


def test_a_preemption_seen_on_the_watch_outlives_the_marked_pods() -> None:
    failed_job = make_gang_job(0, failed="Job has reached the specified backoff limit")
    kube = ListAnswers([make_pod(0, phase="Pending")], [failed_job])
    objects = GangObjects(kube)  # type: ignore[arg-type]
    job = make_job()
    assert asyncio.run(objects.observe("ns", job, 0)).preempted_by is None
    objects.note_pod(_preempted(make_pod(1, attempt=0)))
    gang = asyncio.run(objects.observe("ns", job, 0))
    assert gang.preempted_by == "sched: preempted by ns/urgent-r0"
    # Another namespace's job of the same name, a later attempt: not this preemption.
    assert asyncio.run(objects.observe("other", job, 0)).preempted_by is None
    assert asyncio.run(objects.observe("ns", job, 1)).preempted_by is None
    assert asyncio.run(objects.observe("ns", job, 0)).preempted_by is None  # dropped


def test_a_deleted_trainingjob_forgets_its_preemptions() -> None:
    objects = GangObjects(ListAnswers([], []))  # type: ignore[arg-type]
    objects.note_pod(_preempted(make_pod(0, attempt=0)))
    objects.forget("ns", "gpt")
    assert asyncio.run(objects.observe("ns", make_job(), 0)).preempted_by is None


def test_an_unmarked_pod_is_not_remembered() -> None:
    objects = GangObjects(ListAnswers([], []))  # type: ignore[arg-type]
    pod = make_pod(0, attempt=0)
    pod["metadata"]["namespace"] = "ns"
    objects.note_pod(pod)
    assert asyncio.run(objects.observe("ns", make_job(), 0)).preempted_by is None
