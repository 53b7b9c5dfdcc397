"""Object builders for the operator's unit tests: pods, nodes, Jobs and TrainingJob states
as the API returns them (plain dicts), small enough to read in a test table."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta
from typing import Any

from trainmaster.api import ATTEMPT_LABEL, JOB_LABEL, UNHEALTHY_TAINT, format_time
from trainmaster.objects import gang_name
from trainmaster.operator import JobState
from trainmaster.spec import Job

T0 = datetime(2026, 1, 1, 12, 0, 0, tzinfo=UTC)


def at(seconds: float) -> datetime:
    return T0 + timedelta(seconds=seconds)


def make_job(nodes: int = 2, **policy: Any) -> Job:
    return Job.model_validate({
        "name": "gpt", "image": "img:1", "launcher": "torchrun", "nodes": nodes,
        "restartPolicy": {"maxRestarts": 3, "backoffSeconds": 10, **policy},
    })


def make_state(generation: int = 1, rv: str = "7", **status: Any) -> JobState:
    return JobState.from_body({
        "metadata": {"namespace": "ns", "name": "gpt", "uid": "u-1",
                     "generation": generation, "resourceVersion": rv},
        "status": status,
    })


def running_state(**status: Any) -> JobState:
    """Attempt 0 up and running since T0."""
    base = {"phase": "Running", "attempt": 0, "restarts": 0, "gangGeneration": 1,
            "runningSince": format_time(T0)}
    return make_state(**{**base, **status})


def make_pod(index: int, phase: str = "Running", attempt: int = 0, node: str | None = None,
             exit_code: int | None = None, deleting: bool = False, reason: str | None = None,
             unschedulable: str | None = None, owner: str = "job-uid") -> dict[str, Any]:
    status: dict[str, Any] = {"phase": phase}
    if exit_code is not None:
        status["containerStatuses"] = [{"name": "trainer", "state": {"terminated": {
            "exitCode": exit_code, "reason": "Error"}}}]
    if reason:
        status["reason"] = reason
    if unschedulable:
        status["conditions"] = [{"type": "PodScheduled", "status": "False",
                                 "reason": "Unschedulable", "message": unschedulable}]
    meta: dict[str, Any] = {
        "name": f"{gang_name('gpt', attempt)}-{index}-x",
        "namespace": "ns",
        "uid": f"pod-{attempt}-{index}",
        "labels": {JOB_LABEL: "gpt", ATTEMPT_LABEL: str(attempt)},
        "annotations": {"batch.kubernetes.io/job-completion-index": str(index)},
        "ownerReferences": [{"kind": "Job", "uid": owner, "controller": True}],
    }
    if deleting:
        meta["deletionTimestamp"] = "2026-01-01T12:00:00Z"
    spec = {"nodeName": node if node is not None else (f"node-{index}" if phase != "Pending"
                                                      else None)}
    return {"metadata": meta, "spec": spec, "status": status}


def make_gang_job(attempt: int = 0, failed: str | None = None, complete: bool = False,
                  uid: str = "job-uid") -> dict[str, Any]:
    conds = []
    if failed:
        conds.append({"type": "Failed", "status": "True", "reason": "BackoffLimitExceeded",
                      "message": failed})
    if complete:
        conds.append({"type": "Complete", "status": "True"})
    return {"metadata": {"name": gang_name("gpt", attempt), "uid": uid,
                         "labels": {JOB_LABEL: "gpt", ATTEMPT_LABEL: str(attempt)}},
            "status": {"conditions": conds}}


def make_node(name: str = "node-0", ready: str = "True", gpus: int = 8,
              conditions: dict[str, str] | None = None, fenced: bool = False,
              cordoned: bool = False, labels: dict[str, str] | None = None) -> dict[str, Any]:
    conds = [{"type": "Ready", "status": ready, "reason": "KubeletReady"}]
    conds += [{"type": k, "status": v, "reason": "Agent"} for k, v in (conditions or {}).items()]
    spec: dict[str, Any] = {}
    if fenced:
        spec["taints"] = [{"key": UNHEALTHY_TAINT, "value": "NotReady", "effect": "NoSchedule"}]
    if cordoned or fenced:
        spec["unschedulable"] = True
    return {
        "metadata": {"name": name, "resourceVersion": "42", "labels": labels or {}},
        "spec": spec,
        "status": {"conditions": conds, "allocatable": {"nvidia.com/gpu": str(gpus)}},
    }
