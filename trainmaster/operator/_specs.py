"""Where the operator's cluster spec comes from, and how a TrainingJob's spec is checked.

The cluster spec (networks, scheduler, node shapes) is read from the ConfigMap the Pulumi
component writes (`<cluster>-spec`, key cluster.yaml), or from a file for local runs. It is
re-read when its resourceVersion changes, so a `pulumi up` that changes it is picked up by
the next gang without restarting the operator.
"""

from __future__ import annotations

import json
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from trainmaster.kubeclient import ApiError, Kube, api_path
from trainmaster.objects import SPEC_KEY
from trainmaster.operator._supervisor import Retry
from trainmaster.spec import (
    ClusterSpec,
    Job,
    SpecError,
    load_spec,
    load_spec_text,
    validate_job,
)


class InvalidJob(Exception):
    """A TrainingJob spec the operator cannot build a gang from."""


@dataclass(frozen=True)
class SpecRef:
    """The cluster spec: a ConfigMap (namespace, name) or a file."""

    namespace: str | None = None
    configmap: str | None = None
    file: Path | None = None

    def describe(self) -> str:
        if self.file is not None:
            return str(self.file)
        return f"configmap {self.namespace}/{self.configmap}"


class SpecSource:
    def __init__(self, kube: Kube, ref: SpecRef) -> None:
        if (ref.file is None) == (ref.configmap is None):
            raise ValueError("give exactly one of a spec ConfigMap or a spec file")
        self._kube = kube
        self._ref = ref
        self._version: str | None = None
        self._spec: ClusterSpec | None = None
        self._jobs: dict[tuple[str, str], Job | InvalidJob] = {}

    async def get(self) -> tuple[str, ClusterSpec]:
        """(version, spec). Raises Retry while the spec is missing or invalid."""
        if self._ref.file is not None:
            if self._spec is None:
                try:
                    self._spec = load_spec(self._ref.file)
                except SpecError as exc:
                    raise Retry(f"cluster spec {self._ref.file}: {exc}", 30) from None
                self._version = "file"
            return "file", self._spec
        assert self._ref.namespace and self._ref.configmap
        url = api_path("v1", "configmaps", self._ref.namespace, self._ref.configmap)
        try:
            cm = await self._kube.get(url)
        except ApiError as exc:
            if exc.status == 404:
                raise Retry(f"cluster spec {self._ref.describe()} not found", 10) from None
            raise
        version = str(cm["metadata"].get("resourceVersion"))
        if version != self._version or self._spec is None:
            text = (cm.get("data") or {}).get(SPEC_KEY)
            if not text:
                raise Retry(f"{self._ref.describe()} has no key {SPEC_KEY}", 10)
            try:
                self._spec = load_spec_text(text, self._ref.describe())
            except SpecError as exc:
                raise Retry(f"cluster spec is invalid: {exc}", 30) from None
            self._version = version
            self._jobs.clear()
        return version, self._spec

    def job(self, spec: ClusterSpec, name: str, raw: dict[str, Any]) -> Job:
        """The TrainingJob's spec as a Job, checked against the cluster spec (queue exists,
        pods fit the nodes, ...). Cached per spec text; raises InvalidJob."""
        key = (self._version or "", json.dumps(raw, sort_keys=True))
        hit = self._jobs.get(key)
        if hit is None:
            hit = self._jobs[key] = check_job(spec, name, raw)
        if isinstance(hit, InvalidJob):
            raise hit
        return hit


def in_namespace(spec: ClusterSpec, namespace: str) -> ClusterSpec:
    """The spec with its jobs' namespace set to where the TrainingJob lives (an operator
    serving several namespaces builds each job's gang next to it)."""
    if spec.metadata.namespace == namespace:
        return spec
    meta = spec.metadata.model_copy(update={"namespace": namespace})
    return spec.model_copy(update={"metadata": meta})


def check_job(spec: ClusterSpec, name: str, raw: dict[str, Any]) -> Job | InvalidJob:
    """Validate one job the way the spec validator would, against its cluster (which was
    validated when it was read): the job's schema and rules only."""
    if raw.get("name") != name:
        return InvalidJob(f"spec.name {raw.get('name')!r} must equal metadata.name {name!r}")
    try:
        job = validate_job(spec, raw, f"trainingjob {name}", path="spec")
    except SpecError as exc:
        issues = getattr(exc, "issues", None)
        if issues:
            return InvalidJob("; ".join(f"{i.path}: {i.message}" for i in issues))
        return InvalidJob(str(exc))
    if job.priority is not None and (job.queue, job.priority) not in {
            (j.queue, j.priority) for j in spec.jobs}:
        # Its PriorityClass is rendered from the cluster spec's jobs only: without it the
        # API server refuses the gang's pods.
        return InvalidJob(
            f"spec.priority: no PriorityClass for priority {job.priority} in queue "
            f"{job.queue}: give a job of the cluster spec this queue and priority, or "
            "unset priority to use the queue's")
    return job
