"""Which (node, dataset) pairs need a warm-up: pure decisions over the Node objects, the
jobs that read datasets, and each node's cache state.

A node is warmed for a dataset when a job that reads it may run there: the node is usable
(Ready, not cordoned), matches `cache.nodeSelector`, and one such job's pods would be
placed on it (its nodeSelector, its tolerations plus the GPU taint's, enough GPUs), the
same checks trainmaster-scheduler's filters make. Nodes no such job can use are not
warmed.

The state of each (node, dataset) lives on the node: the label
`dataset.trainmaster.io/<dataset>` (warming, ready, failed, evicted) and the annotation
of the same key (JSON: why, when, the node's boot ID when it became ready, and `verify`
once the node left service). A usable node is warmed when it has no state, when it
returns to service (`verify`: the warm-up finds the cache complete and only marks it
used, or copies it again), when its boot ID changed (a reboot may have lost the cache,
e.g. `medium: memory`), and while its state is warming or failed with no warm-up Job
left (deleted, or removed by its TTL after failing: a retry). Ready and evicted nodes
are never warmed again otherwise: "exactly once" per node, and an evicted dataset is not
copied back over the one that evicted it.
"""

from __future__ import annotations

import json
from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from typing import Any

from trainmaster.api import (
    CACHE_FAILED,
    CACHE_READY,
    CACHE_STATES,
    CACHE_WARMING,
    GPU_RESOURCE,
    UNHEALTHY_TAINT,
    dataset_label,
)
from trainmaster.spec import ClusterSpec, Job

_HARD_EFFECTS = ("NoSchedule", "NoExecute")
_SERVICE_TAINTS = frozenset({
    UNHEALTHY_TAINT, "node.kubernetes.io/unschedulable", "node.kubernetes.io/not-ready",
    "node.kubernetes.io/unreachable"})
"""Taints that say a node is out of service (fenced, cordoned, NotReady), which
`in_service` judges: the placement rules alone ignore them, so a fenced node is still one
that the job could use once it is back."""


@dataclass(frozen=True)
class NodeCache:
    """One dataset's cache state on one node, as its label and annotation say."""

    state: str | None = None
    reason: str = ""
    time: str = ""
    boot_id: str = ""
    verify: bool = False
    """The node left service (fenced, cordoned, NotReady) while it held or warmed the
    dataset: when it returns, a warm-up checks the cache."""
    result: str = ""
    """Which warm-up pod's result this is (its uid and a digest of its message): a pod's
    result is applied once, never again over what happened since."""

    def record(self) -> dict[str, Any]:
        out: dict[str, Any] = {"state": self.state}
        if self.reason:
            out["reason"] = self.reason
        if self.time:
            out["time"] = self.time
        if self.boot_id:
            out["bootID"] = self.boot_id
        if self.verify:
            out["verify"] = True
        if self.result:
            out["result"] = self.result
        return out


def _meta(node: Mapping[str, Any]) -> Mapping[str, Any]:
    return node.get("metadata") or {}


def node_name(node: Mapping[str, Any]) -> str:
    return str(_meta(node).get("name", ""))


def boot_id(node: Mapping[str, Any]) -> str:
    return str(((node.get("status") or {}).get("nodeInfo") or {}).get("bootID") or "")


def cache_state(node: Mapping[str, Any], dataset: str) -> NodeCache:
    key = dataset_label(dataset)
    label = (_meta(node).get("labels") or {}).get(key)
    state = label if label in CACHE_STATES else None
    raw = (_meta(node).get("annotations") or {}).get(key)
    try:
        record = json.loads(raw) if raw else {}
    except ValueError:
        record = {}
    if not isinstance(record, dict):
        record = {}
    return NodeCache(state, str(record.get("reason") or ""), str(record.get("time") or ""),
                     str(record.get("bootID") or ""), bool(record.get("verify")),
                     str(record.get("result") or ""))


def cache_states(node: Mapping[str, Any]) -> dict[str, NodeCache]:
    """Every dataset the node has a state for."""
    prefix = dataset_label("")
    return {key[len(prefix):]: cache_state(node, key[len(prefix):])
            for key in (_meta(node).get("labels") or {}) if key.startswith(prefix)}


def state_patch(dataset: str, cache: NodeCache | None) -> dict[str, Any]:
    """The merge patch that writes (or, for None, removes) the node's state of a dataset."""
    key = dataset_label(dataset)
    if cache is None or cache.state is None:
        return {"metadata": {"labels": {key: None}, "annotations": {key: None}}}
    return {"metadata": {"labels": {key: cache.state},
                         "annotations": {key: json.dumps(cache.record(), sort_keys=True)}}}


def is_ready(node: Mapping[str, Any]) -> bool:
    conditions = (node.get("status") or {}).get("conditions") or []
    return any(c.get("type") == "Ready" and c.get("status") == "True" for c in conditions)


def in_service(node: Mapping[str, Any]) -> bool:
    """Ready, not cordoned, not fenced: a node a new pod may land on now."""
    spec = node.get("spec") or {}
    if spec.get("unschedulable"):
        return False
    if any(t.get("key") == UNHEALTHY_TAINT for t in spec.get("taints") or []):
        return False
    return is_ready(node)


def tolerates(tolerations: Iterable[Mapping[str, Any]], taint: Mapping[str, Any]) -> bool:
    """Kubernetes' toleration matching (core/v1 Toleration.ToleratesTaint)."""
    for t in tolerations:
        if t.get("effect") and t.get("effect") != taint.get("effect"):
            continue
        if t.get("operator") == "Exists":
            if not t.get("key") or t.get("key") == taint.get("key"):
                return True
        elif t.get("key") == taint.get("key") and \
                (t.get("value") or "") == (taint.get("value") or ""):
            return True
    return False


def job_tolerations(job: Job) -> list[dict[str, Any]]:
    """What a job's pods tolerate (as trainmaster.objects renders them)."""
    return [{"key": GPU_RESOURCE, "operator": "Exists", "effect": "NoSchedule"},
            *(t.model_dump(by_alias=True, exclude_none=True) for t in job.tolerations)]


def _gpus(node: Mapping[str, Any]) -> int:
    raw = ((node.get("status") or {}).get("allocatable") or {}).get(GPU_RESOURCE)
    try:
        return int(str(raw))
    except (TypeError, ValueError):
        return 0


def job_can_use(job: Job, node: Mapping[str, Any]) -> bool:
    """Whether the job's pods may be placed on the node now (usable, selected, its taints
    tolerated, enough GPUs): what trainmaster-scheduler's filters check of a node."""
    if not in_service(node):
        return False
    return _could_place(job, node)


def _could_place(job: Job, node: Mapping[str, Any]) -> bool:
    """The job's placement rules alone, whether or not the node is in service now."""
    labels = _meta(node).get("labels") or {}
    if any(labels.get(k) != v for k, v in job.node_selector.items()):
        return False
    tolerations = job_tolerations(job)
    for taint in (node.get("spec") or {}).get("taints") or []:
        if taint.get("key") in _SERVICE_TAINTS or taint.get("effect") not in _HARD_EFFECTS:
            continue  # judged by in_service; soft taints never exclude
        if not tolerates(tolerations, taint):
            return False
    return _gpus(node) >= job.gpus_per_pod


def readers(jobs: Iterable[Job], dataset: str) -> list[Job]:
    return [j for j in jobs if dataset in j.datasets]


@dataclass(frozen=True)
class WarmUp:
    """A warm-up to start: fill `node`'s cache with `dataset`."""

    node: str
    dataset: str
    tolerations: tuple[tuple[tuple[str, Any], ...], ...]
    """The tolerations of the jobs that may use the node (each as sorted items)."""
    simulated: bool
    why: str

    def toleration_list(self) -> list[dict[str, Any]]:
        return [dict(t) for t in self.tolerations]


@dataclass(frozen=True)
class Plan:
    start: tuple[WarmUp, ...] = ()
    verify: tuple[tuple[str, str, NodeCache], ...] = ()
    """(node, dataset, state): mark for a check when the node returns to service."""
    cancel: tuple[str, ...] = ()
    """Warm-up Job names whose node no reading job may use now (or that is gone)."""


def _tolerations_for(jobs: list[Job], node: Mapping[str, Any]
                     ) -> tuple[tuple[tuple[str, Any], ...], ...]:
    seen: dict[tuple[tuple[str, Any], ...], None] = {}
    for job in jobs:
        if job_can_use(job, node):
            for t in job_tolerations(job):
                seen[tuple(sorted(t.items()))] = None
    return tuple(seen)


def selected(spec: ClusterSpec, node: Mapping[str, Any]) -> bool:
    """`cache.nodeSelector` narrows the nodes whose cache is filled."""
    labels = _meta(node).get("labels") or {}
    selector = spec.cache.node_selector if spec.cache else {}
    return all(labels.get(k) == v for k, v in selector.items())


def plan(spec: ClusterSpec, jobs: Iterable[Job], nodes: Iterable[Mapping[str, Any]],
         job_names: Mapping[tuple[str, str], str], existing: Mapping[str, bool],
         simulated: Iterable[str] = ()) -> Plan:
    """What to do now. `job_names[(node, dataset)]` is the warm-up Job's name;
    `existing[name]` says whether that Job exists and is still running (True) or
    finished (False); absent: no such Job."""
    cache = spec.cache
    if cache is None or not cache.warmup:
        return Plan()
    jobs = list(jobs)
    simulated = set(simulated)
    start: list[WarmUp] = []
    verify: list[tuple[str, str, NodeCache]] = []
    wanted: set[str] = set()
    for node in nodes:
        name = node_name(node)
        for dataset in cache.datasets:
            state = cache_state(node, dataset.name)
            reading = readers(jobs, dataset.name)
            could = selected(spec, node) and any(_could_place(j, node) for j in reading)
            job_name = job_names[(name, dataset.name)]
            if not could or not any(job_can_use(j, node) for j in reading):
                if could and state.state in (CACHE_READY, CACHE_WARMING) and not state.verify:
                    verify.append((name, dataset.name, state))  # out of service for now
                continue
            wanted.add(job_name)
            why = _why_warm(state, node, existing.get(job_name))
            if why is not None:
                start.append(WarmUp(name, dataset.name, _tolerations_for(reading, node),
                                    name in simulated, why))
    cancel = tuple(sorted(n for n, running in existing.items() if running and n not in wanted))
    return Plan(tuple(start), tuple(verify), cancel)


def _why_warm(state: NodeCache, node: Mapping[str, Any], job: bool | None) -> str | None:
    """Why the node needs a warm-up of the dataset now, or None. `job`: whether its
    warm-up Job runs (True), finished (False), or is absent (None)."""
    if job:
        return None  # one at a time
    if state.state is None:
        return "no cache state"
    if state.verify:
        return "returned to service"
    booted = boot_id(node)
    if state.state == CACHE_READY and state.boot_id and booted and booted != state.boot_id:
        return "the node rebooted"
    if state.state in (CACHE_WARMING, CACHE_FAILED) and job is None:
        return "retry" if state.state == CACHE_FAILED else "its warm-up is gone"
    return None  # ready, or evicted: not copied back over what evicted it
