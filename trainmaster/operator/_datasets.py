"""Each node's cache state from its warm-up pods: when the warm-up pod on a node has
succeeded, the node's `dataset.trainmaster.io/<dataset>` becomes `ready`; when it failed or
cannot be placed, `failed` with the reason (trainmaster.operator._warm_targets).

The operator writes them because it may patch nodes anyway (fencing); the warm-up pods
themselves hold no API rights, so no pod of the training namespace can write to a node.
Only pods of the warm-up Job of their (node, dataset) (`warmup_job_name`, as the operator
creates it) count, so a pod that merely carries the label cannot change a node's state.

`trainmaster cache warm` ends with a termination message, `{"dataset", "held",
"evicted"}`: the datasets the node's cache holds complete, and those it evicted (least
recently used) to make room. The operator labels every held one and removes the label of
every evicted one `evicted`, so the states follow the cache, not only the last warm-up. A pod
without a message (another warm-up image) labels its own dataset only.

A warm-up that fails writes `{"dataset", "error"}` there instead (a crash that wrote
nothing leaves its last log lines: FallbackToLogsOnError); a container that cannot start
(a missing credentials Secret, an image that cannot be pulled) says why in its waiting
state. `warmup_failure` reads either, so the jobs that wait for the dataset can show it.
"""

from __future__ import annotations

import hashlib
import json
import re
from dataclasses import dataclass
from typing import Any

from trainmaster.api import (
    APP_INSTANCE_LABEL,
    CACHE_EVICTED,
    CACHE_FAILED,
    CACHE_READY,
    CACHE_WARMING,
    DATASET_LABEL,
    POD_SCHEDULED,
    dataset_label,
)
from trainmaster.kubeclient import Kube, node_path
from trainmaster.objects import warmup_job_name
from trainmaster.operator._warm_targets import (
    NodeCache,
    boot_id,
    cache_state,
    job_can_use,
    state_patch,
)
from trainmaster.spec import ClusterSpec, Job

_NAME = re.compile(r"^[a-z0-9]([-a-z0-9]*[a-z0-9])?$")


@dataclass(frozen=True)
class Warmed:
    node: str
    dataset: str
    held: tuple[str, ...] = ()
    evicted: tuple[str, ...] = ()
    result: str = ""
    """The pod's uid and a digest of its message (NodeCache.result)."""


def _names(value: Any) -> tuple[str, ...]:
    """Dataset names from a message: only valid label-name parts (the pod wrote them)."""
    if not isinstance(value, list):
        return ()
    return tuple(v for v in value if isinstance(v, str) and len(v) <= 63 and _NAME.match(v))


def _message(pod: dict[str, Any]) -> dict[str, Any]:
    for status in (pod.get("status") or {}).get("containerStatuses") or []:
        text = ((status.get("state") or {}).get("terminated") or {}).get("message")
        if text:
            try:
                data = json.loads(text)
            except ValueError:
                continue
            if isinstance(data, dict):
                return data
    return {}


def pinned_node(pod: dict[str, Any]) -> str:
    """The node a warm-up pod is pinned to (its required node affinity on the node's
    name), or the node it runs on; "" when neither."""
    affinity = ((pod.get("spec") or {}).get("affinity") or {}).get("nodeAffinity") or {}
    required = affinity.get("requiredDuringSchedulingIgnoredDuringExecution") or {}
    for term in required.get("nodeSelectorTerms") or []:
        for field in term.get("matchFields") or []:
            values = field.get("values") or []
            if field.get("key") == "metadata.name" and len(values) == 1:
                return str(values[0])
    return str((pod.get("spec") or {}).get("nodeName") or "")


def _warmup_dataset(pod: dict[str, Any]) -> str | None:
    """The dataset of a pod of the warm-up Job of its (node, dataset), else None."""
    meta = pod.get("metadata") or {}
    labels = meta.get("labels") or {}
    dataset, cluster, node = labels.get(DATASET_LABEL), labels.get(APP_INSTANCE_LABEL), \
        pinned_node(pod)
    if not dataset or not cluster or not node:
        return None
    expected = warmup_job_name(str(cluster), str(dataset), node)
    if not any(o.get("kind") == "Job" and o.get("name") == expected
               for o in meta.get("ownerReferences") or []):
        return None
    ran_on = (pod.get("spec") or {}).get("nodeName")
    return None if ran_on and ran_on != node else str(dataset)


def warmed(pod: dict[str, Any]) -> Warmed | None:
    """What a warm-up pod that finished its node says the node holds; else None."""
    dataset = _warmup_dataset(pod)
    node = (pod.get("spec") or {}).get("nodeName")
    if not dataset or not node or (pod.get("status") or {}).get("phase") != "Succeeded":
        return None
    message = _message(pod)
    held = tuple(dict.fromkeys((dataset, *_names(message.get("held")))))
    evicted = tuple(e for e in _names(message.get("evicted")) if e not in held)
    digest = hashlib.sha256(json.dumps(message, sort_keys=True).encode()).hexdigest()[:12]
    uid = str((pod.get("metadata") or {}).get("uid") or "")
    return Warmed(node, dataset, held, evicted, f"{uid}:{digest}")


@dataclass(frozen=True)
class WarmupFailure:
    dataset: str
    pod: str
    node: str
    message: str
    attempt: int
    """The container's restart count: each failed run is its own failure."""
    unplaced: bool = False
    """The pod cannot be placed on its node (the scheduler said why in `message`)."""

    def describe(self) -> str:
        where = f" on node {self.node}" if self.node else ""
        return f"warm-up of dataset {self.dataset} failed{where} (pod {self.pod}): " \
               f"{self.message}"


START_FAILURES = frozenset({
    "CreateContainerConfigError", "CreateContainerError", "ErrImagePull", "ImagePullBackOff",
    "InvalidImageName", "RunContainerError",
})
"""Waiting reasons of a container that cannot start: none of them mends itself soon."""


def _failure_text(terminated: dict[str, Any]) -> str:
    text = str(terminated.get("message") or "").strip()
    try:
        data = json.loads(text) if text else None
    except ValueError:
        data = None
    if isinstance(data, dict) and isinstance(data.get("error"), str):
        return str(data["error"])
    if text:
        return text.splitlines()[-1][:1000]  # last log line (FallbackToLogsOnError)
    return f"exit code {terminated.get('exitCode')} ({terminated.get('reason') or 'Error'})"


def warmup_failure(pod: dict[str, Any]) -> WarmupFailure | None:
    """Why a warm-up pod failed, from its container's (last) termination or the reason it
    cannot start; None while it runs or once it succeeded."""
    dataset = _warmup_dataset(pod)
    if dataset is None:
        return None
    status = pod.get("status") or {}
    if status.get("phase") == "Succeeded":
        return None
    name = str((pod.get("metadata") or {}).get("name", ""))
    node = pinned_node(pod)
    if status.get("phase") == "Pending" and not (pod.get("spec") or {}).get("nodeName"):
        for cond in status.get("conditions") or []:
            if cond.get("type") == POD_SCHEDULED and cond.get("status") == "False" \
                    and cond.get("reason") == "Unschedulable":
                why = str(cond.get("message") or "no reason given").strip()
                return WarmupFailure(dataset, name, node, f"cannot be placed: {why}", 0,
                                     unplaced=True)
    for container in status.get("containerStatuses") or []:
        restarts = int(container.get("restartCount") or 0)
        state = container.get("state") or {}
        waiting = state.get("waiting") or {}
        if waiting.get("reason") in START_FAILURES:
            message = f"{waiting['reason']}: {waiting.get('message') or ''}".rstrip(": ")
            return WarmupFailure(dataset, name, node, message, restarts)
        for terminated, attempt in ((state.get("terminated"), restarts),
                                    ((container.get("lastState") or {}).get("terminated"),
                                     restarts - 1)):
            if terminated and terminated.get("exitCode") not in (None, 0):
                return WarmupFailure(dataset, name, node, _failure_text(terminated),
                                     max(attempt, 0))
    return None


class WarmupFailures:
    """The last failure of each dataset's warm-up, per namespace, as the operator saw its
    pods: shown on the jobs held for the dataset. A warm-up pod of the dataset that then
    succeeds, or the failed pod's deletion, clears it."""

    def __init__(self) -> None:
        self._last: dict[tuple[str, str], WarmupFailure] = {}

    def observe(self, namespace: str, pod: dict[str, Any], deleted: bool = False) -> bool:
        """Record what the pod says; return whether a new failure was recorded."""
        return self.observe_failure(namespace, pod, deleted) is not None

    def observe_failure(self, namespace: str, pod: dict[str, Any], deleted: bool = False
                        ) -> WarmupFailure | None:
        """Record what the pod says; return the failure if it is new."""
        dataset = _warmup_dataset(pod)
        if dataset is None:
            return None
        key = (namespace, dataset)
        old = self._last.get(key)
        name = str((pod.get("metadata") or {}).get("name", ""))
        if deleted or (pod.get("status") or {}).get("phase") == "Succeeded":
            if old is not None and (not deleted or old.pod == name):
                del self._last[key]
            return None
        failure = warmup_failure(pod)
        if failure is None or failure == old:
            return None
        self._last[key] = failure
        return failure

    def placed(self, namespace: str, pod: dict[str, Any]) -> WarmupFailure | None:
        """The pod that could not be placed now is (bound, not failing): forget its
        failure and return it, so its node's state goes back to warming."""
        dataset = _warmup_dataset(pod)
        old = self._last.get((namespace, dataset or ""))
        name = str((pod.get("metadata") or {}).get("name", ""))
        if old is None or not old.unplaced or old.pod != name or \
                not (pod.get("spec") or {}).get("nodeName") or warmup_failure(pod) is not None:
            return None
        del self._last[(namespace, old.dataset)]
        return old

    def for_job(self, namespace: str, job: Job) -> WarmupFailure | None:
        return next(iter(self.all_for_job(namespace, job)), None)

    def all_for_job(self, namespace: str, job: Job) -> list[WarmupFailure]:
        """The last failure of each of the job's datasets that has one."""
        return [f for d in job.datasets if (f := self._last.get((namespace, d))) is not None]


def ready_patches(done: Warmed, node: dict[str, Any], now: str
                  ) -> list[dict[str, Any]]:
    """The node's new states after a warm-up succeeded: every held dataset ready (with the
    boot ID it is ready since), every evicted one evicted."""
    booted = boot_id(node)
    return [*(state_patch(d, NodeCache(CACHE_READY, time=now, boot_id=booted,
                                       result=done.result if d == done.dataset else ""))
              for d in done.held),
            *(state_patch(d, NodeCache(CACHE_EVICTED, reason=f"evicted by {done.dataset}",
                                       time=now))
              for d in done.evicted)]


def merged(patches: list[dict[str, Any]]) -> dict[str, Any]:
    out: dict[str, Any] = {"metadata": {"labels": {}, "annotations": {}}}
    for patch in patches:
        for part in ("labels", "annotations"):
            out["metadata"][part].update(patch["metadata"][part])
    return out


async def record_warmed(kube: Kube, pod: dict[str, Any], now: str) -> tuple[str, str] | None:
    """Set the node states of a finished warm-up pod; return (node, dataset)."""
    done = warmed(pod)
    if done is None or (pod.get("metadata") or {}).get("deletionTimestamp"):
        return None
    node = await kube.get(node_path(done.node))
    if cache_state(node, done.dataset).result == done.result:
        return None  # applied before: a later event of the same pod (a relist, its deletion)
    await kube.patch(node_path(done.node), merged(ready_patches(done, node, now)))
    return done.node, done.dataset


async def record_failed(kube: Kube, failure: WarmupFailure, now: str) -> None:
    """The node's state of the dataset: failed, with the reason."""
    if failure.node:
        await kube.patch(node_path(failure.node), state_patch(
            failure.dataset, NodeCache(CACHE_FAILED, reason=failure.message[:1000], time=now)))


async def record_placed(kube: Kube, failure: WarmupFailure, now: str) -> None:
    """A warm-up that could not be placed now runs: the node's state is warming again."""
    if failure.node:
        await kube.patch(node_path(failure.node), state_patch(
            failure.dataset, NodeCache(CACHE_WARMING, reason="placed", time=now)))


def holds(spec: ClusterSpec, job: Job) -> bool:
    """Whether the job must wait for its datasets to be warm (cache.waitForWarmup)."""
    cache = spec.cache
    return bool(job.datasets) and cache is not None and cache.warmup and cache.wait_for_warmup


def ready_nodes(job: Job, dataset: str, nodes: list[dict[str, Any]]) -> int:
    """Nodes the job can use (in service, selected, taints tolerated, GPUs) whose cache
    holds the dataset."""
    return sum(1 for n in nodes
               if cache_state(n, dataset).state == CACHE_READY and job_can_use(job, n))


def waiting_message(job: Job, counts: dict[str, int]) -> str | None:
    """Why the job waits ("dataset wiki warm on 1 of 2 nodes; ..."), or None to go."""
    short = [f"dataset {d} warm on {counts.get(d, 0)} of {job.nodes} nodes"
             for d in job.datasets if counts.get(d, 0) < job.nodes]
    return "; ".join(short) or None


async def datasets_waiting(kube: Kube, spec: ClusterSpec, job: Job) -> str | None:
    """Why the job must wait for its datasets, or None when it may start. Only the nodes
    the job can use count."""
    if not holds(spec, job):
        return None
    return waiting_message(job, {
        d: ready_nodes(job, d, await kube.list(node_path(), f"{dataset_label(d)}={CACHE_READY}"))
        for d in job.datasets})

