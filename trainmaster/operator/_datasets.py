"""Node labels for warmed datasets: when the warm-up pod on a node has succeeded, the node
gets `dataset.trainmaster.io/<dataset>=true`.

The operator writes them because it may patch nodes anyway (fencing); the warm-up pods
themselves hold no API rights, so no pod of the training namespace can write to a node.
Only pods of a warm-up Job (`<cluster>-warmup-<dataset>`, as trainmaster.objects builds it)
count, so a pod that merely carries the label cannot get a node labelled.

`trainmaster cache warm` ends with a termination message, `{"dataset", "held",
"evicted"}`: the datasets the node's cache holds complete, and those it evicted (least
recently used) to make room. The operator labels every held one and removes the label of
every evicted one, so the labels follow the cache, not only the last warm-up. A pod
without a message (another warm-up image) labels its own dataset only.

A warm-up that fails writes `{"dataset", "error"}` there instead (a crash that wrote
nothing leaves its last log lines: FallbackToLogsOnError); a container that cannot start
(a missing credentials Secret, an image that cannot be pulled) says why in its waiting
state. `warmup_failure` reads either, so the jobs that wait for the dataset can show it.
"""

from __future__ import annotations

import json
import re
from dataclasses import dataclass
from typing import Any

from trainmaster.api import DATASET_LABEL, dataset_label
from trainmaster.kubeclient import Kube, node_path
from trainmaster.spec import ClusterSpec, Job

_NAME = re.compile(r"^[a-z0-9]([-a-z0-9]*[a-z0-9])?$")


@dataclass(frozen=True)
class Warmed:
    node: str
    dataset: str
    held: tuple[str, ...] = ()
    evicted: tuple[str, ...] = ()


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


def _warmup_dataset(pod: dict[str, Any]) -> str | None:
    """The dataset of a pod of a warm-up Job (`<cluster>-warmup-<dataset>`), else None."""
    meta = pod.get("metadata") or {}
    dataset = (meta.get("labels") or {}).get(DATASET_LABEL)
    if not dataset:
        return None
    owners = meta.get("ownerReferences") or []
    if not any(
        o.get("kind") == "Job" and str(o.get("name", "")).endswith(f"-warmup-{dataset}")
        for o in owners
    ):
        return None
    return str(dataset)


def warmed(pod: dict[str, Any]) -> Warmed | None:
    """What a warm-up pod that finished its node says the node holds; else None."""
    dataset = _warmup_dataset(pod)
    node = (pod.get("spec") or {}).get("nodeName")
    if not dataset or not node or (pod.get("status") or {}).get("phase") != "Succeeded":
        return None
    message = _message(pod)
    held = tuple(dict.fromkeys((dataset, *_names(message.get("held")))))
    evicted = tuple(e for e in _names(message.get("evicted")) if e not in held)
    return Warmed(node, dataset, held, evicted)


@dataclass(frozen=True)
class WarmupFailure:
    dataset: str
    pod: str
    node: str
    message: str
    attempt: int
    """The container's restart count: each failed run is its own failure."""

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
    node = str((pod.get("spec") or {}).get("nodeName") or "")
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
        dataset = _warmup_dataset(pod)
        if dataset is None:
            return False
        key = (namespace, dataset)
        old = self._last.get(key)
        name = str((pod.get("metadata") or {}).get("name", ""))
        if deleted or (pod.get("status") or {}).get("phase") == "Succeeded":
            if old is not None and (not deleted or old.pod == name):
                del self._last[key]
            return False
        failure = warmup_failure(pod)
        if failure is None or failure == old:
            return False
        self._last[key] = failure
        return True

    def for_job(self, namespace: str, job: Job) -> WarmupFailure | None:
        return next((f for d in job.datasets
                     if (f := self._last.get((namespace, d))) is not None), None)


def label_patch(held: tuple[str, ...] | str, evicted: tuple[str, ...] = ()) -> dict[str, Any]:
    names = (held,) if isinstance(held, str) else held
    labels: dict[str, str | None] = {dataset_label(d): "true" for d in names}
    labels.update({dataset_label(d): None for d in evicted})  # null removes the label
    return {"metadata": {"labels": labels}}


async def label_warmed_node(kube: Kube, pod: dict[str, Any]) -> tuple[str, str] | None:
    """Label the node of a finished warm-up pod; return (node, dataset) labelled."""
    done = warmed(pod)
    if done is None:
        return None
    await kube.patch(node_path(done.node), label_patch(done.held, done.evicted))
    return done.node, done.dataset


def holds(spec: ClusterSpec, job: Job) -> bool:
    """Whether the job must wait for its datasets to be warm (cache.waitForWarmup)."""
    cache = spec.cache
    return bool(job.datasets) and cache is not None and cache.warmup and cache.wait_for_warmup


def warm_nodes(nodes: list[dict[str, Any]]) -> int:
    """Nodes a gang pod could use: not cordoned (a fenced node is cordoned)."""
    return sum(1 for n in nodes if not (n.get("spec") or {}).get("unschedulable"))


def waiting_message(job: Job, counts: dict[str, int]) -> str | None:
    """Why the job waits ("dataset wiki warm on 1 of 2 nodes; ..."), or None to go."""
    short = [f"dataset {d} warm on {counts.get(d, 0)} of {job.nodes} nodes"
             for d in job.datasets if counts.get(d, 0) < job.nodes]
    return "; ".join(short) or None


async def datasets_waiting(kube: Kube, spec: ClusterSpec, job: Job) -> str | None:
    """Why the job must wait for its datasets, or None when it may start."""
    if not holds(spec, job):
        return None
    counts = {d: warm_nodes(await kube.list(node_path(), f"{dataset_label(d)}=true"))
              for d in job.datasets}
    return waiting_message(job, counts)
