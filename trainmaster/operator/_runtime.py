"""The operator's working parts, wired once at startup and shared by the kopf handlers:
API client, cluster spec, node book, reconciler and the per-job supervisor.

Handlers translate watch events into calls here; nothing here knows about kopf.
"""

from __future__ import annotations

import logging
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from trainmaster.api import JOB_LABEL, format_time
from trainmaster.kubeclient import TRAININGJOB_API_VERSION, ApiError, Kube, node_path
from trainmaster.operator._announce import fenced, topology_unknown
from trainmaster.operator._datasets import (
    WarmupFailures,
    record_failed,
    record_placed,
    record_warmed,
)
from trainmaster.operator._faults import HealthRules, node_health
from trainmaster.operator._fence import fence
from trainmaster.operator._metrics import OperatorMetrics
from trainmaster.operator._model import Key, utcnow
from trainmaster.operator._nodes import NodeBook
from trainmaster.operator._reconcile import Reconciler
from trainmaster.operator._specs import SpecRef, SpecSource
from trainmaster.operator._supervisor import Retry, Supervisor
from trainmaster.operator._topology import TopologyBook, has_gpus, judge_topology
from trainmaster.operator._warmer import WarmDemand, Warmer, unschedulable_event
from trainmaster.spec import ClusterSpec

log = logging.getLogger(__name__)

_SPEC_REREAD_SECONDS = 30.0
"""How stale the spec may be when labelling node topology."""


@dataclass(frozen=True)
class OperatorConfig:
    """How `trainmaster operator run` runs."""

    spec: SpecRef
    """Where the cluster spec is: the `<cluster>-spec` ConfigMap, or a file."""
    namespaces: tuple[str, ...] = ()
    """Namespaces (globs allowed) whose TrainingJobs to serve; empty with clusterwide."""
    clusterwide: bool = False
    kubeconfig: Path | None = None
    """None: in-cluster credentials in a pod, else $KUBECONFIG / the local cluster's."""
    health: HealthRules = field(default_factory=HealthRules)
    resync_seconds: float = 120.0
    """Every job is looked at this often even when no event arrives."""
    liveness: str | None = None
    """kopf liveness endpoint, e.g. http://0.0.0.0:8080/healthz."""
    metrics_address: str = "127.0.0.1"
    """Where /metrics listens: loopback on a host; the pod's IP in a cluster."""
    metrics_port: int = 0
    """0: no /metrics server."""


def owner_of(body: dict[str, Any]) -> str | None:
    """The TrainingJob that controls this object, by its ownerReference."""
    for ref in (body.get("metadata") or {}).get("ownerReferences") or []:
        if ref.get("controller") and ref.get("kind") == "TrainingJob" \
                and ref.get("apiVersion") == TRAININGJOB_API_VERSION:
            return str(ref.get("name"))
    return None


class Runtime:
    def __init__(self, config: OperatorConfig, kube: Kube) -> None:
        self.config = config
        self.kube = kube
        self.specs = SpecSource(kube, config.spec)
        self.book = NodeBook()
        self.warmups = WarmupFailures()
        self.warmer = Warmer(kube, self.specs, WarmDemand())
        self.reconciler = Reconciler(kube, self.specs, self.book, warmups=self.warmups,
                                     readers=self.warmer.reader)
        self.supervisor = Supervisor(self.reconciler, config.resync_seconds)
        self.metrics = OperatorMetrics()
        self.topology = TopologyBook()
        self._topology_reported: set[str] = set()
        # Node events come in floods (every node at startup): one spec read per while.
        self._topology_spec: tuple[str, ClusterSpec] | None = None
        self._topology_spec_at = 0.0

    @classmethod
    async def open(cls, config: OperatorConfig) -> Runtime:
        runtime = cls(config, await Kube.connect(config.kubeconfig, pool=32,
                                                user_agent="trainmaster-operator"))
        runtime.warmer.start()
        if config.metrics_port:
            port = runtime.metrics.serve(config.metrics_address, config.metrics_port)
            log.info("metrics on http://%s:%d/metrics", config.metrics_address, port)
        return runtime

    async def close(self) -> None:
        self.metrics.stop()
        await self.warmer.close()
        await self.supervisor.close()
        await self.kube.close()

    async def check(self, name: str, raw_spec: dict[str, Any]) -> None:
        """Validate a TrainingJob's spec (raises InvalidJob, or Retry without a spec)."""
        _, spec = await self.specs.get()
        self.specs.job(spec, name, raw_spec)

    def poke(self, namespace: str, name: str, apply: bool = False) -> None:
        self.supervisor.poke(Key(namespace, name), apply)

    async def forget(self, namespace: str, name: str) -> None:
        self.warmer.reader(Key(namespace, name), None)
        await self.supervisor.forget(Key(namespace, name))

    def on_child(self, body: dict[str, Any], namespace: str) -> None:
        """An owned object changed or vanished: its job re-applies (drift is restored)."""
        owner = owner_of(body)
        if owner:
            self.poke(namespace, owner, apply=True)

    def on_pod(self, body: dict[str, Any], event_type: str | None) -> None:
        meta = body.get("metadata") or {}
        job = (meta.get("labels") or {}).get(JOB_LABEL)
        if not job:
            return
        key = Key(meta.get("namespace", ""), job)
        self.reconciler.gang.note_pod(body)
        if event_type == "DELETED":
            self.book.untrack_pod(meta.get("uid", ""))
        else:
            self.book.track_pod(meta.get("uid", ""), (body.get("spec") or {}).get("nodeName"),
                                key)
        self.supervisor.poke(key)

    async def on_node(self, body: dict[str, Any], event_type: str | None) -> None:
        """Judge the node; fence it if it is sick; wake the jobs with pods on it."""
        name = (body.get("metadata") or {}).get("name", "")
        self.warmer.node_changed(body, event_type)
        if event_type == "DELETED":
            self.book.forget(name)
            self.metrics.forget_node(name)
            changed = True
        else:
            health = node_health(body, self.config.health)
            self.metrics.observe_node(body, health)
            await self._label_topology(body)
            changed = self.book.update(name, health)
            if health.problem and not health.fenced:
                await self._fence(name, health.problem)
        if changed:
            for key in self.book.jobs_on(name):
                self.supervisor.poke(key)

    async def _label_topology(self, body: dict[str, Any]) -> None:
        """Give a GPU node its topology labels, or report that it has none."""
        if not has_gpus(body):
            return
        name = str((body.get("metadata") or {}).get("name", ""))
        now = time.monotonic()
        if self._topology_spec is None or now - self._topology_spec_at > _SPEC_REREAD_SECONDS:
            try:
                self._topology_spec = await self.specs.get()
            except Retry:
                return  # no spec yet: the next event of this node will do it
            self._topology_spec_at = now
        version, spec = self._topology_spec
        verdict = judge_topology(body, spec, self.topology.tree(version, spec))
        self.metrics.node_topology_known.labels(name).set(0 if verdict.unknown else 1)
        try:
            if verdict.patch:
                await self.kube.patch(node_path(name), {"metadata": {"labels": verdict.patch}})
                log.info("labelled node %s from %s: %s", name, verdict.source, verdict.patch)
            if verdict.unknown and name not in self._topology_reported:
                self._topology_reported.add(name)
                await topology_unknown(self.kube, name, verdict.unknown, utcnow())
            elif not verdict.unknown:
                self._topology_reported.discard(name)
        except ApiError as exc:
            if exc.status != 404:
                log.warning("could not label the topology of node %s: %s", name, exc)

    async def on_warmup_pod(self, body: dict[str, Any], event_type: str | None = None
                            ) -> None:
        """A warm-up pod changed: its node's state becomes ready once it holds the
        dataset, failed (with the reason) when it failed or cannot be placed (also a
        Warning Event on the node); a failure wakes the jobs of its namespace, so those
        held for the dataset show it at once."""
        namespace = str((body.get("metadata") or {}).get("namespace", ""))
        stamp = format_time(utcnow())
        try:
            failure = self.warmups.observe_failure(namespace, body,
                                                   deleted=event_type == "DELETED")
            if failure is not None:
                for key in self.supervisor.known():
                    if key.namespace == namespace:
                        self.supervisor.poke(key)
                await record_failed(self.kube, failure, stamp)
                if failure.unplaced:
                    await unschedulable_event(self.kube, failure.node, failure.pod,
                                              failure.dataset, failure.message)
            if event_type == "DELETED":
                self.warmer.poke()  # a warm-up Job's TTL ran out: a failed one is retried
                return
            if (placed := self.warmups.placed(namespace, body)) is not None:
                await record_placed(self.kube, placed, stamp)
            done = await record_warmed(self.kube, body, stamp)
        except ApiError as exc:
            if exc.status != 404:
                log.warning("could not record the node state of warm-up pod %s: %s",
                            (body.get("metadata") or {}).get("name"), exc)
            return
        if done:
            log.info("node %s holds dataset %s", *done)

    async def _fence(self, name: str, problem: str) -> None:
        now = utcnow()
        try:
            if await fence(self.kube, name, problem, now):
                log.warning("fenced node %s: %s", name, problem)
                self.metrics.fences.inc()
                await fenced(self.kube, name, problem, now)
        except ApiError as exc:
            if exc.status != 404:
                log.warning("could not fence node %s (%s): %s", name, problem, exc)
