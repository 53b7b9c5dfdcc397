"""Operator-driven warm-ups: one Job per (node, dataset), pinned to its node, created as
nodes appear, return to service or lose their cache (the decisions are in
_warm_targets). One task makes every change, one pass at a time, so no two passes can
start the same warm-up; the Job's name is fixed per (node, dataset), so neither can a
restarted operator.

A pass runs when a node changes, when a job that reads datasets is held or started, and
every `every` seconds. The jobs that decide which nodes are warmed are the cluster
spec's and every TrainingJob the operator has started or holds (`WarmDemand`).
"""

from __future__ import annotations

import asyncio
import json
import logging
import time
from collections.abc import Mapping
from datetime import datetime
from typing import Any

from trainmaster import polling
from trainmaster.api import (
    APP_COMPONENT_LABEL,
    APP_INSTANCE_LABEL,
    CACHE_FAILED,
    CACHE_WARMING,
    DATASET_LABEL_PREFIX,
    GPU_RESOURCE,
    KWOK_NODE_ANNOTATION,
    format_time,
)
from trainmaster.kubeclient import (
    ApiError,
    Kube,
    api_path,
    job_path,
    node_path,
    retry_on_conflict,
)
from trainmaster.objects import build_node_warmup, cache_config_name, warmup_job_name
from trainmaster.operator._events import post
from trainmaster.operator._model import Key, utcnow
from trainmaster.operator._specs import SpecSource
from trainmaster.operator._supervisor import Retry
from trainmaster.operator._warm_targets import (
    NodeCache,
    Plan,
    WarmUp,
    boot_id,
    cache_state,
    is_ready,
    node_name,
    plan,
    state_patch,
)
from trainmaster.spec import ClusterSpec, Job
from trainmaster.tasks import cancel_all

log = logging.getLogger(__name__)

CANCEL_GRACE_SECONDS = 60.0
"""After a start, no running warm-up is cancelled for this long: the jobs that want it are
known only once the operator has looked at each TrainingJob again."""
WARMUP_NOT_CREATED = "WarmupNotCreated"
"""Event reason (on the node): the API refused the warm-up Job."""
WARMUP_UNSCHEDULABLE = "WarmupUnschedulable"
"""Event reason (on the node): the warm-up pod cannot be placed there; the scheduler's
message says why."""


class WarmDemand:
    """The TrainingJobs that read datasets, as the reconciler saw them: with the spec's
    jobs, they decide which nodes are warmed."""

    def __init__(self) -> None:
        self._jobs: dict[Key, Job] = {}

    def want(self, key: Key, job: Job) -> bool:
        """Record the job; True if that changed what is wanted."""
        if not job.datasets or self._jobs.get(key) == job:
            return False
        self._jobs[key] = job
        return True

    def drop(self, key: Key) -> bool:
        return self._jobs.pop(key, None) is not None

    def jobs(self) -> list[Job]:
        return list(self._jobs.values())


def fingerprint(node: Mapping[str, Any]) -> str:
    """What of a node decides its warm-ups: labels, taints, cordon, readiness, boot ID,
    GPUs."""
    meta, spec, status = (node.get(k) or {} for k in ("metadata", "spec", "status"))
    return json.dumps([meta.get("uid"), meta.get("labels"), spec.get("taints"),
                       spec.get("unschedulable"), is_ready(node), boot_id(node),
                       (status.get("allocatable") or {}).get(GPU_RESOURCE),
                       {k: v for k, v in (meta.get("annotations") or {}).items()
                        if k.startswith(DATASET_LABEL_PREFIX)}], sort_keys=True)


def _finished(job: Mapping[str, Any]) -> bool:
    conditions = (job.get("status") or {}).get("conditions") or []
    return any(c.get("type") in ("Complete", "Failed") and c.get("status") == "True"
               for c in conditions)


def _node_ref(node: Mapping[str, Any]) -> dict[str, Any]:
    meta = node.get("metadata") or {}
    return {"apiVersion": "v1", "kind": "Node",
            "metadata": {"name": meta.get("name", ""), "uid": meta.get("uid", "")}}


class Warmer:
    def __init__(self, kube: Kube, specs: SpecSource, demand: WarmDemand,
                 every: float = 30.0) -> None:
        self.kube = kube
        self.specs = specs
        self.demand = demand
        self.every = every
        self._wake = asyncio.Event()
        self._born = time.monotonic()
        self._seen: dict[str, str] = {}
        # Jobs that hold a warm-up's name but are not listed as the operator's (someone
        # else made them): they count as that warm-up while they exist, so a pass never
        # fights them.
        self._taken: set[str] = set()
        self._task: asyncio.Task[None] | None = None

    def start(self) -> None:
        self._task = asyncio.get_running_loop().create_task(self._run(), name="warmer")

    def poke(self) -> None:
        self._wake.set()

    def node_changed(self, body: Mapping[str, Any], event_type: str | None) -> None:
        """Wake a pass when what decides the node's warm-ups changed (not on every status
        heartbeat)."""
        name = node_name(body)
        if event_type == "DELETED":
            self._seen.pop(name, None)
            self.poke()
            return
        mark = fingerprint(body)
        if self._seen.get(name) != mark:
            self._seen[name] = mark
            self.poke()

    def reader(self, key: Key, job: Job | None) -> None:
        """A job that reads datasets was seen (None: it ended)."""
        if self.demand.want(key, job) if job is not None else self.demand.drop(key):
            self.poke()

    async def close(self) -> None:
        if self._task is not None:
            await cancel_all([self._task])
            self._task = None

    async def _run(self) -> None:
        while True:
            await polling.wait_event(self._wake, self.every)
            self._wake.clear()
            await asyncio.sleep(0.2)  # node events come in bursts: one pass for a burst
            try:
                again = await self.run_once()
            except Retry:
                continue  # no spec yet
            except Exception:  # a pass must never end the loop; the next one retries
                log.exception("warm-up pass failed")
                again = True
            if again:
                self._wake.set()
                await asyncio.sleep(1.0)

    async def run_once(self, now: datetime | None = None) -> bool:
        """One pass; True if another pass is needed soon (a finished Job was deleted so
        that its replacement can be created)."""
        _, spec = await self.specs.get()
        cache = spec.cache
        if cache is None or not cache.warmup or not cache.datasets:
            return False
        ns, cluster = spec.metadata.namespace, spec.metadata.name
        nodes = await self.kube.list(node_path())
        listed = await self.kube.list(
            job_path(ns), f"{APP_COMPONENT_LABEL}=cache-warmup,{APP_INSTANCE_LABEL}={cluster}")
        # A Job being deleted counts as finished: it is replaced once it is gone.
        existing = {str(j["metadata"]["name"]): not _finished(j)
                    and not j["metadata"].get("deletionTimestamp") for j in listed}
        for name in sorted(self._taken - set(existing)):
            try:
                other = await self.kube.get(job_path(ns, name))
            except ApiError as exc:
                if not exc.not_found:
                    raise
                self._taken.discard(name)
                continue
            existing[name] = not _finished(other)
        names = {(node_name(n), d.name): warmup_job_name(cluster, d.name, node_name(n))
                 for n in nodes for d in cache.datasets}
        simulated = {node_name(n) for n in nodes
                     if KWOK_NODE_ANNOTATION in ((n.get("metadata") or {}).get("annotations")
                                                 or {})}
        todo = plan(spec, [*spec.jobs, *self.demand.jobs()], nodes, names, existing,
                    simulated)
        return await self._carry_out(spec, todo, nodes, names, existing, now or utcnow())

    async def _carry_out(self, spec: ClusterSpec, todo: Plan, nodes: list[dict[str, Any]],
                         names: Mapping[tuple[str, str], str], existing: Mapping[str, bool],
                         now: datetime) -> bool:
        by_name = {node_name(n): n for n in nodes}
        stamp = format_time(now)
        for node, dataset, state in todo.verify:
            marked = NodeCache(state.state, state.reason, state.time, state.boot_id, True,
                               state.result)
            await self._swap_state(node, dataset, state, marked)
        pairs = {job: pair for pair, job in names.items()}
        settled = time.monotonic() - self._born >= CANCEL_GRACE_SECONDS
        for job in todo.cancel if settled else ():
            log.info("warm-up %s is no longer wanted (its node left service or no job "
                     "that reads the dataset may use it): deleting it", job)
            await self.kube.delete(job_path(spec.metadata.namespace, job),
                                   propagation="Background", missing_ok=True)
            node, dataset = pairs.get(job, ("", ""))
            state = cache_state(by_name[node], dataset) if node in by_name else NodeCache()
            if state.state == CACHE_WARMING:
                # No warm-up any more: no state, so the node is warmed when it is wanted.
                await self._swap_state(node, dataset, state, None)
        again = False
        owner = await self._owner(spec) if todo.start else None
        for warm in todo.start:
            name = names[(warm.node, warm.dataset)]
            if name in existing or warm.node not in by_name:  # finished: make room first
                await self.kube.delete(job_path(spec.metadata.namespace, name),
                                       propagation="Background", missing_ok=True)
                again = True
                continue
            await self._start(spec, warm, by_name[warm.node], owner, stamp)
        return again

    async def _owner(self, spec: ClusterSpec) -> dict[str, Any] | None:
        """The cache ConfigMap, owner of every warm-up Job: deleting the stack deletes
        them (garbage collection). None when it is not there (a spec from a file)."""
        name = cache_config_name(spec.metadata.name)
        try:
            cm = await self.kube.get(api_path("v1", "configmaps", spec.metadata.namespace,
                                              name))
        except ApiError as exc:
            if exc.not_found:
                return None
            raise
        return {"apiVersion": "v1", "kind": "ConfigMap", "name": name,
                "uid": cm["metadata"]["uid"]}

    async def _start(self, spec: ClusterSpec, warm: WarmUp, node: dict[str, Any],
                     owner: dict[str, Any] | None, stamp: str) -> None:
        cache = spec.cache
        assert cache is not None
        dataset = next(d for d in cache.datasets if d.name == warm.dataset)
        body = build_node_warmup(spec, dataset, warm.node, warm.toleration_list(),
                                 simulated=warm.simulated, owner=owner)
        before = cache_state(node, warm.dataset)
        warming = NodeCache(CACHE_WARMING, reason=warm.why, time=stamp, boot_id=before.boot_id)
        # Only over the state this pass planned from: a warm-up pod's result that arrived
        # meanwhile wins, and the next pass decides again.
        if not await self._swap_state(warm.node, warm.dataset, before, warming):
            return
        try:
            await self.kube.post(job_path(spec.metadata.namespace), body)
        except ApiError as exc:
            if exc.status == 409:  # a Job of that name that is not listed as ours
                self._taken.add(str(body["metadata"]["name"]))
                await self._swap_state(warm.node, warm.dataset, warming, before)
                return
            message = f"the warm-up of dataset {warm.dataset} could not be created: {exc}"
            log.warning("node %s: %s", warm.node, message)
            await self._patch_node(warm.node, state_patch(warm.dataset, NodeCache(
                CACHE_FAILED, reason=message[:1000], time=stamp)))
            await post(self.kube, _node_ref(node), "Warning", WARMUP_NOT_CREATED, message,
                       utcnow())
            return
        log.info("warming dataset %s on node %s (%s)", warm.dataset, warm.node, warm.why)

    async def _swap_state(self, node: str, dataset: str, expect: NodeCache,
                          new: NodeCache | None) -> bool:
        """Write the node's state of the dataset only while it still is `expect` (guarded
        by the node's resourceVersion, read again on a conflict); True if written."""

        async def attempt() -> bool:
            body = await self.kube.get(node_path(node))
            if cache_state(body, dataset) != expect:
                return False
            patch = state_patch(dataset, new)
            patch["metadata"]["resourceVersion"] = body["metadata"]["resourceVersion"]
            await self.kube.patch(node_path(node), patch)
            return True

        try:
            return await retry_on_conflict(attempt)
        except ApiError as exc:
            if exc.not_found:
                return False
            raise

    async def _patch_node(self, node: str, patch: dict[str, Any]) -> None:
        try:
            await self.kube.patch(node_path(node), patch)
        except ApiError as exc:
            if not exc.not_found:
                raise


async def unschedulable_event(kube: Kube, node: str, pod: str, dataset: str, message: str
                              ) -> None:
    """A Warning on the node: its warm-up of `dataset` cannot be placed, and why."""
    try:
        body = await kube.get(node_path(node))
    except ApiError as exc:
        if exc.not_found:
            return
        raise
    await post(kube, _node_ref(body), "Warning", WARMUP_UNSCHEDULABLE,
               f"warm-up of dataset {dataset} (pod {pod}) {message}", utcnow(),
               name=f"{node}.warmup-unschedulable.{pod}"[:253])
