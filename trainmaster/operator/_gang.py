"""The gang's objects in the API: observe them, apply them, clean up old attempts, stop
a failed one. Every operation here is idempotent; the reconciler may repeat any of them."""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Mapping
from dataclasses import replace
from datetime import datetime
from typing import Any

from trainmaster.api import CHECKPOINT_ANNOTATION, JOB_LABEL, RESTART_ANNOTATION, format_time
from trainmaster.kubeclient import ApiError, Kube, job_path, pod_path, podgroup_path
from trainmaster.objects import build_gang, gang_name
from trainmaster.operator._faults import gang_view, pod_view
from trainmaster.operator._model import GangView, NodeHealth
from trainmaster.spec import ClusterSpec, Job

log = logging.getLogger(__name__)

IDENTITY_KINDS = ("ServiceAccount", "Role", "RoleBinding")


class GangObjects:
    def __init__(self, kube: Kube) -> None:
        self.kube = kube
        self._outdated: set[str] = set()
        self._marked: dict[tuple[str, str], str] = {}
        self._preempted: dict[tuple[str, str, int], str] = {}

    def note_pod(self, body: Mapping[str, Any]) -> None:
        """Remember a gang pod the scheduler marked preempted, as the watch saw it: on a
        loaded API server the pod can be deleted, its rigid Job failed and its replacement
        created before the next list, which then shows a failed gang and no preemption."""
        view = pod_view(body)
        job = ((body.get("metadata") or {}).get("labels") or {}).get(JOB_LABEL)
        if view.preempted_by and view.attempt is not None and job:
            namespace = (body.get("metadata") or {}).get("namespace", "")
            self._preempted[(namespace, job, view.attempt)] = view.preempted_by

    def forget(self, namespace: str, job: str) -> None:
        """The TrainingJob is gone: a new one of the same name starts with a clean slate."""
        for key in [k for k in self._preempted if k[:2] == (namespace, job)]:
            del self._preempted[key]

    async def observe(self, namespace: str, job: Job, attempt: int) -> GangView:
        selector = f"{JOB_LABEL}={job.name}"
        pods, jobs = await asyncio.gather(
            self.kube.list(pod_path(namespace), selector),
            self.kube.list(job_path(namespace), selector),
        )
        gang = gang_view(attempt, pods, jobs)
        for key in [k for k in self._preempted if k[:2] == (namespace, job.name)
                    and k[2] < attempt]:
            del self._preempted[key]  # an older attempt's: already handled
        seen = self._preempted.get((namespace, job.name, attempt))
        if gang.preempted_by is None and seen is not None:
            gang = replace(gang, preempted_by=seen)
        return gang

    async def apply(
        self,
        spec: ClusterSpec,
        job: Job,
        owner: dict[str, Any],
        attempt: int,
        resume_from: str | None,
    ) -> None:
        """Server-side apply the attempt's objects: the job's identity (ServiceAccount,
        Role, RoleBinding), NetworkPolicy, Service, ConfigMap, PodGroup, Job."""
        *supporting, gang_job = build_gang(spec, job, attempt, resume_from, owner=owner)
        # One after the other: a RoleBinding is checked against the Role it names, and the
        # Job's pods against their ServiceAccount.
        identity = [o for o in supporting if o["kind"] in IDENTITY_KINDS]
        supporting = [o for o in supporting if o["kind"] not in IDENTITY_KINDS]
        for obj in identity:
            await self.kube.apply(obj)
        results = await asyncio.gather(*(self.kube.apply(o) for o in supporting),
                                       return_exceptions=True)
        for obj, result in zip(supporting, results, strict=True):
            if isinstance(result, BaseException):
                # Without its PodGroup CRD or with a broken ConfigMap the gang can still be
                # created; the Job is what must exist.
                log.warning("apply %s %s failed: %s", obj["kind"], obj["metadata"]["name"],
                            result)
        try:
            await self.kube.apply(gang_job)
        except ApiError as exc:
            if exc.status != 422:
                raise
            # A Job's pod template is immutable: a changed cluster spec reaches the gang at
            # its next attempt, not by rewriting this one. Said once per gang, not per event.
            name = f"{owner['metadata']['namespace']}/{gang_job['metadata']['name']}"
            if name not in self._outdated:
                self._outdated.add(name)
                log.warning("Job %s keeps its pod template until the next attempt: %s",
                            name, getattr(exc, "reason", exc))

    async def mark_checkpoint(self, namespace: str, job: Job, attempt: int,
                              when: datetime) -> None:
        """Annotate the gang's PodGroup with the job's last checkpoint time: the
        scheduler's preemption weighs the work a victim would lose since then."""
        await self._mark(namespace, job, attempt, CHECKPOINT_ANNOTATION, format_time(when))

    async def mark_restart(self, namespace: str, job: Job, attempt: int,
                           seconds: float) -> None:
        """Annotate the gang's PodGroup with how long the job's last restart took from
        the launcher's start to its first step (status.lastRestart): preemption prices a
        restart of this gang as its GPUs idle that long."""
        await self._mark(namespace, job, attempt, RESTART_ANNOTATION, f"{seconds:g}")

    async def _mark(self, namespace: str, job: Job, attempt: int, key: str,
                    value: str) -> None:
        """Once per value (remembered here; a restarted operator writes it once more)."""
        name = gang_name(job.name, attempt)
        memo = (f"{namespace}/{name}", key)
        if self._marked.get(memo) == value:
            return
        try:
            await self.kube.patch(podgroup_path(namespace, name), {"metadata": {
                "annotations": {key: value}}})
        except ApiError as exc:
            if exc.status != 404:  # no PodGroup (CRD missing): nothing to mark
                raise
        self._marked[memo] = value

    async def clean(self, namespace: str, job: Job, gang: GangView, keep: int,
                    sick: Mapping[str, NodeHealth]) -> None:
        """Delete every Job, pod and PodGroup of attempts other than `keep`. The Job goes
        first so its controller cannot replace the pods we delete."""
        stale_jobs = list(gang.stale_jobs)
        if gang.attempt != keep and gang.job_exists:
            stale_jobs.append(gang_name(job.name, gang.attempt))
        await asyncio.gather(*(self.kube.delete(job_path(namespace, name), propagation="Background",
                                               missing_ok=True)
                               for name in stale_jobs))
        pods = [p for p in (*gang.stale_pods, *gang.pods) if p.attempt != keep]
        await asyncio.gather(*(
            # Pods on a sick node get no grace period: its kubelet may never confirm.
            self.kube.delete(pod_path(namespace, p.name),
                             grace=0 if p.node in sick else None, missing_ok=True)
            for p in pods
        ))
        groups = await self.kube.list(podgroup_path(namespace), f"{JOB_LABEL}={job.name}")
        await asyncio.gather(*(
            self.kube.delete(podgroup_path(namespace, g["metadata"]["name"]), missing_ok=True)
            for g in groups
            if g["metadata"]["name"] != gang_name(job.name, keep)
            and not g["metadata"].get("deletionTimestamp")
        ))

    async def remove(self, namespace: str, job: Job) -> int:
        """Delete every Job, pod and PodGroup of the job, of any attempt (a suspend, as
        Kueue's: nothing of the gang holds GPUs or a place in the queue). The Service,
        ConfigMap and identity stay for the resume; the checkpoint volume is not touched.
        Pods get their grace period, in which a trainer may write a last checkpoint.
        Returns how many objects were deleted (0 once the gang is gone)."""
        selector = f"{JOB_LABEL}={job.name}"
        jobs, pods, groups = await asyncio.gather(
            self.kube.list(job_path(namespace), selector),
            self.kube.list(pod_path(namespace), selector),
            self.kube.list(podgroup_path(namespace), selector),
        )

        def live(items: list[dict[str, Any]]) -> list[str]:
            return [o["metadata"]["name"] for o in items
                    if not o["metadata"].get("deletionTimestamp")]

        # The Jobs first, so their controller cannot replace the pods deleted next.
        await asyncio.gather(*(self.kube.delete(job_path(namespace, name),
                                                propagation="Background", missing_ok=True)
                               for name in live(jobs)))
        await asyncio.gather(*(self.kube.delete(pod_path(namespace, name), missing_ok=True)
                               for name in live(pods)))
        await asyncio.gather(*(self.kube.delete(podgroup_path(namespace, name),
                                                missing_ok=True)
                               for name in live(groups)))
        return len(live(jobs)) + len(live(pods)) + len(live(groups))

    async def stop(self, namespace: str, job: Job, attempt: int) -> None:
        """Suspend the failed attempt's Job: its controller stops the pods still running
        (freeing their GPUs) and keeps the failed ones, with their logs, for a person."""
        try:
            await self.kube.patch(job_path(namespace, gang_name(job.name, attempt)),
                                  {"spec": {"suspend": True}})
        except ApiError as exc:
            if exc.status != 404:
                raise
