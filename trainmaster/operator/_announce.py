"""The Events that tell people what the operator did: restarts, the end of a job, fences.

A restart's or an end's Event is derived from the TrainingJob's status and has a fixed
name per job and attempt, so it is posted again after an operator restart without ever
being doubled: the status is written first, the Event follows, and a pass that finds the
Event missing posts it.
"""

from __future__ import annotations

from datetime import datetime
from typing import Any

from trainmaster.api import (
    COND_SUSPENDED,
    EVENT_FAILED,
    EVENT_FENCED,
    EVENT_INVALID_SPEC,
    EVENT_PREEMPTED,
    EVENT_RESTARTING,
    EVENT_RESUMED,
    EVENT_RESUMED_NEWER,
    EVENT_SPEC_CHANGED,
    EVENT_SUCCEEDED,
    EVENT_SUSPENDED,
    EVENT_TOPOLOGY_UNKNOWN,
    EVENT_WAITING_FOR_DATASETS,
    FAILED,
    SUCCEEDED,
    UNHEALTHY_TAINT,
    WARMUP_FAILED,
    topology_label,
)
from trainmaster.kubeclient import Kube
from trainmaster.objects import gang_name
from trainmaster.operator import _events as events
from trainmaster.operator._datasets import WarmupFailure
from trainmaster.operator._elastic import EVENT_GROWN, EVENT_SHRUNK, resizes
from trainmaster.operator._model import Cause, JobState
from trainmaster.spec import Job


def _prefix(body: dict[str, Any]) -> str:
    """<job>.<uid prefix>: a job deleted and created again gets Events of its own."""
    meta = body.get("metadata") or {}
    return f"{meta.get('name')}.{str(meta.get('uid', ''))[:8]}"


class Announcer:
    def __init__(self, kube: Kube) -> None:
        self.kube = kube
        self._posted: set[str] = set()  # Events this process knows exist

    async def _once(self, body: dict[str, Any], kind: str, reason: str, message: str,
                    now: datetime, suffix: str) -> None:
        name = f"{_prefix(body)}.{suffix}"
        key = f"{(body.get('metadata') or {}).get('namespace')}/{name}"
        if key not in self._posted:
            await events.post(self.kube, body, kind, reason, message, now, name=name)
            self._posted.add(key)

    async def restart(self, body: dict[str, Any], state: JobState, job: Job,
                      now: datetime) -> None:
        """The current attempt's restart, from its status record (if it has one)."""
        history = state.status.get("restartHistory") or []
        entry = history[-1] if history and isinstance(history[-1], dict) else None
        if entry is None or entry.get("newAttempt") != state.attempt:
            return
        resume = entry.get("resumeFrom") or "the start (no checkpoint reported)"
        nodes = [n for n in entry.get("nodes") or [] if n not in str(entry.get("message"))]
        blamed = f" (node {', '.join(nodes)})" if nodes else ""
        what = f"{entry.get('cause')}: {entry.get('message')}{blamed}"
        gang = gang_name(job.name, state.attempt)
        if entry.get("cause") == str(Cause.SPEC_CHANGED):
            await self._once(body, "Normal", EVENT_SPEC_CHANGED,
                             f"{what}: new gang {gang}, resuming from {resume}", now,
                             f"r{state.attempt}.specchanged")
            return
        if entry.get("cause") == str(Cause.RESUMED):
            await self._once(body, "Normal", EVENT_RESUMED,
                             f"resumed: new gang {gang}, resuming from {resume} (not counted "
                             "against maxRestarts)", now, f"r{state.attempt}.unsuspended")
            return
        if entry.get("cause") == str(Cause.PREEMPTED):
            await self._once(body, "Normal", EVENT_PREEMPTED,
                             f"{what}: new gang {gang}, resuming from {resume} (not counted "
                             "against maxRestarts)", now, f"r{state.attempt}.preempted")
            return
        restart_at = state.restart_at
        wait = (restart_at - now).total_seconds() if restart_at and restart_at > now else 0
        when = f" in {wait:.0f}s" if wait else ""
        message = (f"restart {entry.get('restart')}/{job.restart_policy.max_restarts}: "
                   f"{what}; new gang {gang}{when}, resuming from {resume}")
        await self._once(body, "Warning", EVENT_RESTARTING, message, now,
                         f"r{state.attempt}.restarting")

    async def suspended(self, body: dict[str, Any], state: JobState, now: datetime) -> None:
        """spec.suspend removed the gang: once per suspension (a suspend and a resume each
        change metadata.generation)."""
        cond = state.condition(COND_SUSPENDED)
        message = str(cond.get("message")) if cond else "spec.suspend is true"
        await self._once(body, "Normal", EVENT_SUSPENDED, message, now,
                         f"g{state.generation}.suspended")

    async def resumed(self, body: dict[str, Any], state: JobState, now: datetime) -> None:
        """The current gang's launcher resumed from a newer checkpoint than resumeFrom, one
        it found complete in the checkpoint directory at start-up (status.resumedFrom,
        written by the launcher: trainmaster.launch._resume)."""
        entry = state.status.get("resumedFrom")
        if not isinstance(entry, dict) or entry.get("attempt") != state.attempt:
            return
        path = entry.get("path")
        if not path or path == state.resume_from:
            return
        chosen = state.resume_from or "the start (no checkpoint reported)"
        await self._once(body, "Normal", EVENT_RESUMED_NEWER,
                         f"gang {gang_name(state.name, state.attempt)} resumed from {path} "
                         f"(step {entry.get('step')}), found complete in the checkpoint "
                         f"directory at start-up: newer than {chosen}, the newest reported "
                         "when the gang was created", now, f"r{state.attempt}.resumed")

    async def resized(self, body: dict[str, Any], state: JobState, before: int, after: int,
                      why: str, now: datetime) -> None:
        """An elastic gang's world size changed (status.elastic.resizes numbers the Event)."""
        grew = after > before
        await self._once(body, "Normal" if grew else "Warning",
                         EVENT_GROWN if grew else EVENT_SHRUNK,
                         f"world size {before} -> {after}: {why}", now,
                         f"r{state.attempt}.resize{resizes(state)}")

    async def end(self, body: dict[str, Any], state: JobState, now: datetime) -> None:
        if state.phase == SUCCEEDED:
            await self._once(body, "Normal", EVENT_SUCCEEDED,
                             f"every pod of {gang_name(state.name, state.attempt)} succeeded", now,
                             f"r{state.attempt}.succeeded")
            return
        cond = state.condition(FAILED)
        if state.phase == FAILED and cond is not None:
            await self._once(body, "Warning", EVENT_FAILED,
                             f"{cond.get('reason')}: {cond.get('message')}", now,
                             f"r{state.attempt}.failed")

    async def waiting_for_datasets(self, body: dict[str, Any], state: JobState, reason: str,
                                   now: datetime) -> None:
        await self._once(body, "Normal", EVENT_WAITING_FOR_DATASETS,
                         f"held until its datasets are warm: {reason}", now,
                         f"g{state.generation}.waitingfordatasets")

    async def warmup_failed(self, body: dict[str, Any], failure: WarmupFailure,
                            now: datetime) -> None:
        """One Warning per failed run of a warm-up pod that this job waits for."""
        await self._once(body, "Warning", WARMUP_FAILED, failure.describe(), now,
                         f"warmupfailed.{failure.pod}.{failure.attempt}")

    async def invalid_spec(self, body: dict[str, Any], state: JobState, message: str,
                           now: datetime) -> None:
        await self._once(body, "Warning", EVENT_INVALID_SPEC, message, now,
                         f"g{state.generation}.invalidspec")


async def fenced(kube: Kube, node: str, problem: str, now: datetime) -> None:
    """A fence, on the Node. Best effort: the node's trainmaster.io/fenced annotation and
    the restart Event (which names the node) carry the same facts."""
    ref = {"apiVersion": "v1", "kind": "Node", "metadata": {"name": node, "uid": node}}
    await events.post(kube, ref, "Warning", EVENT_FENCED,
                      f"{problem}: cordoned and tainted {UNHEALTHY_TAINT}:NoSchedule "
                      "by trainmaster; gangs on it are restarted elsewhere", now)


async def topology_unknown(kube: Kube, node: str, levels: tuple[str, ...], now: datetime) -> None:
    """A GPU node whose place in the switch tree is unknown: the scheduler cannot keep a
    gang's traffic under one switch on it."""
    ref = {"apiVersion": "v1", "kind": "Node", "metadata": {"name": node, "uid": node}}
    labels = ", ".join(topology_label(lv) for lv in levels)
    await events.post(kube, ref, "Warning", EVENT_TOPOLOGY_UNKNOWN,
                      f"no {labels}: the spec's switch tree does not name this node and no "
                      "topology.nodeLabels label is set on it; name it in topology.switches, "
                      "map a level to a label it has, or label it yourself", now)
