"""What the UI shows is computed from: the API objects it watches, kept current by
reflectors (list once, then watch: a change costs O(change), never a re-list).

``World`` is a plain read-only picture (lists of JSON objects) that the pure view
functions take; ``Store`` fills one from the API and wakes the server-sent-event streams
when something changed. No Secret is ever read: the kinds watched are nodes, pods,
TrainingJobs, PodGroups, Events and the scheduler's own ConfigMaps (its config and its
published queue ledger, by label).
"""

from __future__ import annotations

import asyncio
import contextlib
import time
from collections import defaultdict, deque
from collections.abc import Callable
from dataclasses import dataclass, field
from datetime import datetime
from typing import Any

from trainmaster import polling
from trainmaster.api import (
    APP_COMPONENT_LABEL,
    APP_PART_OF_LABEL,
    QUEUE_LEDGER_COMPONENT,
    UTC,
    parse_time,
)
from trainmaster.kubeclient import (
    DELETED,
    JSON,
    Kube,
    Reflector,
    api_path,
    localqueue_path,
    node_path,
    pod_path,
    podgroup_path,
    trainingjob_path,
)
from trainmaster.status import (
    LiveProgress,
    PrometheusError,
    is_prometheus_pod,
    ledger_entries,
    live_progress,
    prometheus_url,
    scheduler_configs,
    scheduler_queues,
)

SCHEDULER_CONFIG_SELECTOR = (
    "app.kubernetes.io/component=scheduler,app.kubernetes.io/part-of=trainmaster")
QUEUE_LEDGER_SELECTOR = (
    f"{APP_COMPONENT_LABEL}={QUEUE_LEDGER_COMPONENT},{APP_PART_OF_LABEL}=trainmaster")
EVENT_KINDS = frozenset({"TrainingJob", "PodGroup", "Node"})
"""Events about these are kept (what a job page, a queue's preemptions and the topology's
causes show); others are dropped on arrival."""
SAMPLES = 32
"""Checkpoint samples kept per job for its step rate."""
LIVE_EVERY = 15.0
"""Seconds between two reads of the jobs' live progress from Prometheus (a scrape's)."""


@dataclass(frozen=True)
class Sample:
    """One checkpoint a job reported: its step and when (for the step rate)."""

    at: datetime
    step: int


@dataclass
class World:
    """The cluster as the UI sees it at one moment."""

    nodes: list[JSON] = field(default_factory=list)
    pods: list[JSON] = field(default_factory=list)
    trainingjobs: list[JSON] = field(default_factory=list)
    podgroups: list[JSON] = field(default_factory=list)
    events: list[JSON] = field(default_factory=list)
    queues: list[dict[str, Any]] = field(default_factory=list)
    """The scheduler config's queue entries (name, nominalQuota, cohort, ...)."""
    configs: list[dict[str, Any]] = field(default_factory=list)
    """The scheduler's whole config documents (queues, cohorts, fairSharing)."""
    ledger: list[dict[str, Any]] | None = None
    """The queue entries the scheduler published (None: none published)."""
    localqueues: list[JSON] = field(default_factory=list)
    """The LocalQueues watched (every one for a person's UI; the in-cluster UI's, those of
    the team namespaces, where the scheduler reads them too)."""
    samples: dict[tuple[str, str], list[Sample]] = field(default_factory=dict)
    """(namespace, job) -> checkpoints seen, oldest first."""
    live: dict[tuple[str, str], LiveProgress] = field(default_factory=dict)
    """(namespace, job) -> its progress as Prometheus has it (empty: no Prometheus)."""
    live_note: str = ""
    """Where the live progress came from, or why there is none."""
    now: datetime = field(default_factory=lambda: datetime.now(UTC))


def checkpoint_sample(tj: JSON) -> Sample | None:
    ckpt = (tj.get("status") or {}).get("lastCheckpoint") or {}
    at, step = parse_time(ckpt.get("time")), ckpt.get("step")
    if at is None or not isinstance(step, int):
        return None
    return Sample(at, step)


@dataclass(frozen=True)
class Scope:
    """Where the store watches the kinds it need not read everywhere; None: in every
    namespace, as a person's `trainmaster ui` does. The in-cluster UI names its own
    (trainmaster.objects' `ui_command`), exactly those its Roles let it read."""

    jobs: tuple[str, ...] | None = None
    """Namespaces of the TrainingJobs."""
    events: tuple[str, ...] | None = None
    """Namespaces of the Events shown (jobs', gangs' and nodes')."""
    configs: str | None = None
    """Namespace of the scheduler's config ConfigMaps (its queues)."""
    local_queues: tuple[str, ...] | None = None
    """Namespaces of the LocalQueues (the team namespaces, which the scheduler resolves
    queue labels in); empty: none."""


def _each(namespaces: tuple[str, ...] | None) -> tuple[str | None, ...]:
    return (None,) if namespaces is None else namespaces


class Store:
    """Reflectors over the watched kinds; ``version`` moves on every change and
    ``changed`` wakes whoever waits for one."""

    def __init__(self, kube: Kube, scope: Scope | None = None,
                 prometheus: str | None = None) -> None:
        """``scope``: the namespaces to watch (all by default; the in-cluster UI's Roles
        allow fewer). ``prometheus``: its URL for the jobs' live progress; None: the
        Prometheus operator's pod among the pods, if any; "off": none."""
        scope = scope or Scope()
        self.kube = kube
        self.prometheus = prometheus
        self.live: dict[tuple[str, str], LiveProgress] = {}
        self.live_note = ""
        self.version = 0
        self.changed_at = time.monotonic()
        self._changed = asyncio.Event()
        self._samples: dict[tuple[str, str], deque[Sample]] = defaultdict(
            lambda: deque(maxlen=SAMPLES))
        self._events: dict[str, JSON] = {}
        self._tasks: list[asyncio.Task[None]] = []
        self.nodes = self._reflector(node_path(), "nodes")
        self.pods = self._reflector(pod_path(), "pods")
        self.jobs = [self._reflector(trainingjob_path(ns),
                                     "trainingjobs" if ns is None else f"trainingjobs-{ns}",
                                     self._on_job, optional=True) for ns in _each(scope.jobs)]
        self.groups = self._reflector(podgroup_path(None), "podgroups", optional=True)
        self.event_lists = [self._reflector(api_path("v1", "events", ns),
                                            "events" if ns is None else f"events-{ns}",
                                            self._on_event) for ns in _each(scope.events)]
        self.configs = self._reflector(
            api_path("v1", "configmaps", scope.configs), "scheduler-configs",
            params={"labelSelector": SCHEDULER_CONFIG_SELECTOR})
        self.ledgers = self._reflector(
            api_path("v1", "configmaps", scope.configs), "queue-ledgers",
            params={"labelSelector": QUEUE_LEDGER_SELECTOR})
        self.localqueue_lists = [
            self._reflector(localqueue_path(ns),
                            "localqueues" if ns is None else f"localqueues-{ns}", optional=True)
            for ns in _each(scope.local_queues)]
        self.reflectors = [self.nodes, self.pods, *self.jobs, self.groups, *self.event_lists,
                           self.configs, self.ledgers, *self.localqueue_lists]

    def _reflector(self, path: str, name: str,
                   also: Callable[[str, JSON], None] | None = None,
                   *, optional: bool = False,
                   params: dict[str, str] | None = None) -> Reflector:
        def handler(kind: str, obj: JSON) -> None:
            if also is not None:
                also(kind, obj)
            self._bump()

        return Reflector(self.kube, path, handler, name=f"ui-{name}", optional=optional,
                         params=params)

    def _on_job(self, kind: str, obj: JSON) -> None:
        meta = obj.get("metadata") or {}
        key = (meta.get("namespace", ""), meta.get("name", ""))
        if kind == DELETED:
            self._samples.pop(key, None)
            return
        sample = checkpoint_sample(obj)
        seen = self._samples[key]
        if sample is not None and (not seen or seen[-1] != sample):
            seen.append(sample)

    def _on_event(self, kind: str, obj: JSON) -> None:
        uid = (obj.get("metadata") or {}).get("uid", "")
        if kind == DELETED or (obj.get("involvedObject") or {}).get("kind") not in EVENT_KINDS:
            self._events.pop(uid, None)
        else:
            self._events[uid] = obj

    def _bump(self) -> None:
        self.version += 1
        self.changed_at = time.monotonic()
        # Wake every waiter, and give the next ones a fresh event to wait on.
        changed, self._changed = self._changed, asyncio.Event()
        changed.set()

    async def start(self, timeout: float = 60.0) -> None:
        """Start every reflector and wait until each has listed once; then read the live
        progress every LIVE_EVERY seconds."""
        self._tasks = [asyncio.create_task(r.run()) for r in self.reflectors]
        async with asyncio.timeout(timeout):
            await asyncio.gather(*(r.synced.wait() for r in self.reflectors))
        if self.prometheus != "off":
            await self.read_live()
            self._tasks.append(asyncio.create_task(self._poll_live()))

    def prometheus_url(self) -> str | None:
        if self.prometheus:
            return None if self.prometheus == "off" else self.prometheus
        return prometheus_url([p for p in self.pods.store.values() if is_prometheus_pod(p)])

    async def read_live(self) -> None:
        """Read the jobs' live progress once (trainmaster.status.live_progress, as
        `trainmaster status`); a Prometheus that does not answer leaves none."""
        url = self.prometheus_url()
        if url is None:
            live, note = {}, "no Prometheus: progress from the TrainingJobs"
        else:
            try:
                live = await asyncio.to_thread(live_progress, url, 3.0)
                note = f"step rates and checkpoint ages from {url}"
            except PrometheusError as exc:
                live, note = {}, f"{exc}; progress from the TrainingJobs"
        if (live, note) != (self.live, self.live_note):
            self.live, self.live_note = live, note
            self._bump()

    async def _poll_live(self) -> None:
        while True:
            await asyncio.sleep(LIVE_EVERY)
            await self.read_live()

    async def stop(self) -> None:
        for task in self._tasks:
            task.cancel()
        for task in self._tasks:
            with contextlib.suppress(asyncio.CancelledError, Exception):
                await task
        self._tasks = []

    async def wait_change(self, seen: int, timeout: float) -> int:
        """The version once it moved past ``seen`` (or after ``timeout``)."""
        if self.version == seen:
            await polling.wait_event(self._changed, timeout)
        return self.version

    def world(self) -> World:
        return World(
            nodes=list(self.nodes.store.values()),
            pods=list(self.pods.store.values()),
            trainingjobs=[tj for r in self.jobs for tj in r.store.values()],
            podgroups=list(self.groups.store.values()),
            events=list(self._events.values()),
            queues=scheduler_queues(self.configs.store.values()),
            configs=scheduler_configs(self.configs.store.values()),
            ledger=ledger_entries(self.ledgers.store.values()),
            localqueues=[lq for r in self.localqueue_lists for lq in r.store.values()],
            samples={k: list(v) for k, v in self._samples.items()},
            live=dict(self.live),
            live_note=self.live_note,
        )
