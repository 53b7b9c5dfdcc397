"""Elastic jobs (`elastic: {minNodes, maxNodes}`), pure: when a lost member shrinks the
gang instead of restarting it, and the world size the operator records.

The ranks re-rendezvous on their own (trainmaster.launch._elastic) within seconds of a
peer's loss; the operator's part is the objects: it deletes the lost member's pod (with no
grace on a sick node, whose kubelet may never confirm) so the Job replaces it with a
pending pod, which the scheduler binds when a node frees (the gang grows back), and it
fences the sick node so the replacement does not land there. Below minNodes, a lost member
is what it is for a rigid gang: the whole gang restarts from its checkpoint.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, replace
from datetime import datetime
from typing import Any

from trainmaster.api import EVENT_ELASTIC_GROW, EVENT_ELASTIC_SHRINK, format_time
from trainmaster.operator._faults import retryable
from trainmaster.operator._model import Cause, Fault, GangView, JobState, NodeHealth, PodView
from trainmaster.spec import Job

EVENT_SHRUNK = EVENT_ELASTIC_SHRINK
EVENT_GROWN = EVENT_ELASTIC_GROW


def required_pods(job: Job) -> int:
    """Pods that must run for the job to count as Running: minNodes for an elastic job."""
    return job.elastic.min_nodes if job.elastic is not None else job.nodes


def _usable(pod: PodView, health: Mapping[str, NodeHealth]) -> bool:
    return not pod.node or health.get(pod.node, NodeHealth()).usable


def world_size(gang: GangView, health: Mapping[str, NodeHealth]) -> int:
    """Members running on usable nodes: the size the launchers train at once they agree."""
    return sum(1 for p in gang.pods if p.phase == "Running" and _usable(p, health))



@dataclass(frozen=True)
class Shrink:
    """Members lost while enough others run on: delete these pods, record the new size."""

    fault: Fault
    pods: tuple[PodView, ...]
    before: int
    after: int


def shrink(job: Job, gang: GangView, health: Mapping[str, NodeHealth]) -> Shrink | None:
    """The lost members of an elastic gang, when at least minNodes others run on; None for
    a rigid job, nothing lost, a non-retryable failure (the job fails), a finished run, or
    too few left (the whole gang restarts)."""
    if job.elastic is None or not gang.job_exists or gang.count("Succeeded"):
        return None
    lost = tuple(p for p in gang.pods
                 if p.phase == "Failed" or (p.phase != "Succeeded" and not _usable(p, health)))
    if not lost or any(p.phase == "Failed" and not retryable(job, p.exit_code) for p in lost):
        return None
    staying = [p for p in gang.pods if p.phase == "Running" and p not in lost]
    if len(staying) < job.elastic.min_nodes:
        return None
    sick = tuple(sorted({p.node for p in lost if p.node and not _usable(p, health)}))
    what = "; ".join(_describe(p, health) for p in lost)
    cause = Cause.NODE_UNHEALTHY if sick else Cause.POD_FAILED
    return Shrink(Fault(cause, what, sick, lost[0].name, lost[0].exit_code),
                  lost, len(staying) + len(lost), len(staying))


def _describe(pod: PodView, health: Mapping[str, NodeHealth]) -> str:
    rank = f" (index {pod.index})" if pod.index is not None else ""
    if pod.node and not _usable(pod, health):
        problem = health[pod.node].problem or "fenced"
        return f"pod {pod.name}{rank} on unhealthy node {pod.node}: {problem}"
    code = f"exited with code {pod.exit_code}" if pod.exit_code is not None else \
        f"failed: {pod.reason or pod.message or 'no exit code'}"
    return f"pod {pod.name}{rank} {code}" + (f" on {pod.node}" if pod.node else "")


def without_member_preemption(job: Job, gang: GangView, health: Mapping[str, NodeHealth]
                              ) -> GangView:
    """An elastic gang whose preempted members leave at least minNodes running is shrunk,
    not restarted: the scheduler took members above the minimum (a cheap preemption)."""
    if job.elastic is None or gang.preempted_by is None:
        return gang
    if world_size(gang, health) < job.elastic.min_nodes:
        return gang
    return replace(gang, preempted_by=None)


def recorded_size(state: JobState) -> int | None:
    raw = state.status.get("elastic")
    size = raw.get("worldSize") if isinstance(raw, dict) else None
    return size if isinstance(size, int) else None


def resizes(state: JobState) -> int:
    raw = state.status.get("elastic")
    count = raw.get("resizes") if isinstance(raw, dict) else None
    return count if isinstance(count, int) else 0


def resize_patch(state: JobState, before: int | None, after: int, why: str, now: datetime
                 ) -> dict[str, Any]:
    """status.elastic: the world size now, and the last change (from, to, why, when)."""
    entry: dict[str, Any] = {"worldSize": after, "resizes": resizes(state)}
    if before is not None and before != after:
        entry["resizes"] += 1
        entry["lastResize"] = {"from": before, "to": after, "reason": why,
                               "time": format_time(now), "attempt": state.attempt}
    return {"elastic": entry}
