"""`trainmaster status`: the cluster's workload as the scheduler and operator see it, from a
kubeconfig alone.

GPUs used and free per switch at every topology level (spine, leaf, ...), queues, training
jobs with phase, restarts, last checkpoint and age, fenced nodes, each dataset's cache
state per node, and every gang the
scheduler serves that still pends (a TrainingJob's, or any PodGroup's) with the reason.
`summarize` is pure; `collect_view` reads the API; `trainmaster.status._render` prints.
"""

from __future__ import annotations

import asyncio
from collections import defaultdict
from collections.abc import Iterable, Mapping
from dataclasses import asdict, dataclass, field
from datetime import datetime
from pathlib import Path
from typing import Any

import yaml

from trainmaster.api import (
    APP_COMPONENT_LABEL,
    APP_PART_OF_LABEL,
    GPU_RESOURCE,
    NODE_READY,
    PENDING,
    QUEUE_LABEL,
    QUEUE_LEDGER_COMPONENT,
    RESTARTING,
    TOPOLOGY_PREFIX,
    UNHEALTHY_TAINT,
    UTC,
    parse_time,
)
from trainmaster.kubeclient import (
    ApiError,
    Kube,
    SyncKube,
    localqueue_path,
    node_path,
    pod_path,
    podgroup_path,
    trainingjob_path,
)
from trainmaster.operator import fenced_record
from trainmaster.status._cache import DatasetCache, dataset_caches
from trainmaster.status._fairness import ledger_entries, queue_fairness, scheduler_configs
from trainmaster.status._live import (
    TRAININGJOB,
    JobKey,
    LiveProgress,
    PrometheusError,
    discover_prometheus,
    job_progress,
    live_progress,
)
from trainmaster.status._pending import PendingGang, explain_pending, podgroup_gangs
from trainmaster.status._queue_book import QueueBook


@dataclass
class SwitchUsage:
    level: str
    switch: str
    parent: str | None
    nodes: int = 0
    usable: int = 0
    """Nodes that take new pods: Ready, not cordoned, not fenced."""
    gpus: int = 0
    used: int = 0
    free: int = 0
    """GPUs not requested, on usable nodes only."""
    fenced: int = 0


@dataclass
class JobRow:
    namespace: str
    name: str
    phase: str
    restarts: int
    attempt: int | None
    nodes: int
    checkpoint: str | None
    step: int | None
    age_seconds: float
    current_step: int | None = None
    """The newest training step: from Prometheus only (``step`` is the checkpoint's)."""
    step_rate: float | None = None
    """Steps per second: from Prometheus only (the TrainingJob has no rate)."""
    checkpoint_age: float | None = None
    """Seconds since the last checkpoint: Prometheus', else status.lastCheckpoint.time."""
    progress_from: str = TRAININGJOB
    """Where step, rate and checkpoint age come from: Prometheus or TrainingJob."""


@dataclass
class FencedNode:
    name: str
    switch: str | None
    reason: str
    since: str | None


@dataclass
class QueueRow:
    """A queue's GPUs: in use (what the scheduler's ledger has admitted to it; without a
    published ledger, its bound pods by label ``kueue.x-k8s.io/queue-name``), its nominal
    quota (None: unlimited or unknown) and what it borrows beyond it."""

    name: str
    in_use: int
    nominal_quota: int | None
    borrowed: int
    cohort: str | None = None


@dataclass
class ResourceView:
    levels: list[str]
    switches: list[SwitchUsage] = field(default_factory=list)
    queues: list[QueueRow] = field(default_factory=list)
    jobs: list[JobRow] = field(default_factory=list)
    fenced: list[FencedNode] = field(default_factory=list)
    pending: list[PendingGang] = field(default_factory=list)
    caches: list[DatasetCache] = field(default_factory=list)
    """Each dataset's cache state per node (the nodes' dataset.trainmaster.io labels)."""
    gpus_used: int = 0
    """GPUs requested by bound, unfinished pods on the nodes (what the switches add up)."""
    gpus_outside_queues: int = 0
    """Of those, GPUs of pods in no known queue: why the queues' sum can be lower."""
    progress_note: str = ""
    """Where the jobs' step rates came from, or why Prometheus gave none."""
    queues_from: str = "pod labels"
    """Where the queues' use comes from: `scheduler ledger` (what trainmaster-scheduler
    admitted, as it publishes it) or `pod labels` (no ledger published: no scheduler
    running, or no right to read it)."""
    fairness: dict[str, Any] | None = None
    """The queue tree's fair sharing (``trainmaster.scheduler.FairReport.to_json``): each
    queue's and cohort's DRF share, entitlement, and per resource used, nominal, borrowed
    and lent; None without queues that have a quota."""

    def to_json(self) -> dict[str, Any]:
        return asdict(self)


def _natural(text: str) -> list[Any]:
    import re

    return [int(p) if p.isdigit() else p for p in re.split(r"(\d+)", text)]


def topology_levels(nodes: list[dict[str, Any]]) -> list[str]:
    """Switch levels, top first: a higher level has fewer distinct switches."""
    values: dict[str, set[str]] = defaultdict(set)
    for node in nodes:
        for key, value in ((node.get("metadata") or {}).get("labels") or {}).items():
            if key.startswith(TOPOLOGY_PREFIX):
                values[key[len(TOPOLOGY_PREFIX):]].add(value)
    return sorted(values, key=lambda level: (len(values[level]), level))


def gpu_request(pod: dict[str, Any]) -> int:
    """GPUs a pod's containers request."""
    total = 0
    for container in (pod.get("spec") or {}).get("containers") or []:
        requests = (container.get("resources") or {}).get("requests") or {}
        try:
            total += int(requests.get(GPU_RESOURCE, 0))
        except (TypeError, ValueError):
            continue
    return total


def _usable(node: dict[str, Any]) -> bool:
    spec = node.get("spec") or {}
    if spec.get("unschedulable"):
        return False
    if any(t.get("key") == UNHEALTHY_TAINT for t in spec.get("taints") or []):
        return False
    conds = (node.get("status") or {}).get("conditions") or []
    return any(c.get("type") == NODE_READY and c.get("status") == "True" for c in conds)


def queue_rows(pods: list[dict[str, Any]], queues: list[dict[str, Any]]) -> list[QueueRow]:
    """Per queue: GPUs of its bound, unfinished pods against its nominal quota.
    ``queues`` are the scheduler config's entries (``name``, ``nominalQuota``, ``cohort``)."""
    in_use: dict[str, int] = defaultdict(int)
    for pod in pods:
        phase = (pod.get("status") or {}).get("phase")
        queue = ((pod.get("metadata") or {}).get("labels") or {}).get(QUEUE_LABEL)
        if queue and (pod.get("spec") or {}).get("nodeName") \
                and phase not in ("Succeeded", "Failed"):
            in_use[queue] += gpu_request(pod)
    known = {str(q["name"]): q for q in queues if isinstance(q, dict) and q.get("name")}
    rows = []
    for name in sorted(set(known) | set(in_use)):
        entry = known.get(name, {})
        quota = entry.get("nominalQuota", entry.get("gpuQuota"))
        quota = int(quota) if quota is not None else None
        used = in_use.get(name, 0)
        rows.append(QueueRow(name, used, quota,
                             max(0, used - quota) if quota is not None else 0,
                             entry.get("cohort")))
    return rows


def ledger_rows(ledger: list[dict[str, Any]]) -> list[QueueRow]:
    """Queue rows from the scheduler's published ledger entries (``queues`` of its
    ConfigMap: name, cohort, nominalQuota, flavorsUsage[].resources[] total/borrowed)."""
    rows: dict[str, QueueRow] = {}
    for entry in ledger:
        name = str(entry.get("name") or "")
        if not name:
            continue
        total = borrowed = 0
        for flavor in entry.get("flavorsUsage") or []:
            for res in (flavor or {}).get("resources") or []:
                if (res or {}).get("name") == GPU_RESOURCE:
                    total += int(res.get("total") or 0)
                    borrowed += int(res.get("borrowed") or 0)
        quota = entry.get("nominalQuota")
        rows[name] = QueueRow(name, total, int(quota) if quota is not None else None,
                              borrowed, entry.get("cohort"))
    return [rows[name] for name in sorted(rows)]


def summarize(
    nodes: list[dict[str, Any]],
    pods: list[dict[str, Any]],
    trainingjobs: list[dict[str, Any]],
    now: datetime,
    queues: list[dict[str, Any]] | None = None,
    podgroups: list[dict[str, Any]] | None = None,
    unbound: list[dict[str, Any]] | None = None,
    ledger: list[dict[str, Any]] | None = None,
    configs: list[dict[str, Any]] | None = None,
    localqueues: list[dict[str, Any]] | None = None,
) -> ResourceView:
    """``pods``: bound, unfinished pods; ``unbound``: pods waiting for a node (members
    of pending gangs); ``podgroups``: every PodGroup the scheduler serves; ``ledger``:
    the queue entries the scheduler published (None: none found, count by labels);
    ``configs``: the scheduler's config documents (queues, cohorts, fairSharing);
    ``localqueues``: the LocalQueues (how a team namespace's label resolves)."""
    levels = topology_levels(nodes)
    used: dict[str, int] = defaultdict(int)
    for pod in pods:
        phase = (pod.get("status") or {}).get("phase")
        node = (pod.get("spec") or {}).get("nodeName")
        if node and phase not in ("Succeeded", "Failed"):
            used[node] += gpu_request(pod)
    view = ResourceView(levels)
    if ledger is not None:
        view.queues, view.queues_from = ledger_rows(ledger), "scheduler ledger"
    else:
        view.queues = queue_rows(pods, queues or [])
    if configs:
        view.fairness = queue_fairness(configs, ledger, pods)
    switches: dict[tuple[str, str], SwitchUsage] = {}
    leaf = levels[-1] if levels else None
    for node in nodes:
        meta = node.get("metadata") or {}
        labels = meta.get("labels") or {}
        name = meta.get("name", "")
        try:
            gpus = int(((node.get("status") or {}).get("allocatable") or {}).get(GPU_RESOURCE, 0))
        except (TypeError, ValueError):
            gpus = 0
        usable = _usable(node)
        fenced = any(t.get("key") == UNHEALTHY_TAINT
                     for t in (node.get("spec") or {}).get("taints") or [])
        parent = None
        for level in levels:
            switch = labels.get(TOPOLOGY_PREFIX + level, "-")
            usage = switches.setdefault((level, switch), SwitchUsage(level, switch, parent))
            usage.nodes += 1
            usage.usable += int(usable)
            usage.gpus += gpus
            usage.used += used.get(name, 0)
            usage.free += max(gpus - used.get(name, 0), 0) if usable else 0
            usage.fenced += int(fenced)
            parent = switch
        if fenced:
            record = fenced_record(node) or {}
            taint = next(t for t in node["spec"]["taints"] if t.get("key") == UNHEALTHY_TAINT)
            view.fenced.append(FencedNode(
                name, labels.get(TOPOLOGY_PREFIX + leaf) if leaf else None,
                str(record.get("reason") or taint.get("value") or "unhealthy"),
                record.get("time")))
    order = {level: i for i, level in enumerate(levels)}
    view.switches = _tree_order(list(switches.values()), order)
    view.fenced.sort(key=lambda f: _natural(f.name))
    view.caches = dataset_caches(nodes)
    for tj in trainingjobs:
        row, pending = _job_row(tj, now)
        view.jobs.append(row)
        if pending is not None:
            view.pending.append(pending)
    view.jobs.sort(key=lambda j: (j.namespace, j.name))
    view.pending.extend(podgroup_gangs(podgroups or [], unbound or [], trainingjobs))
    explain_pending(view.pending, QueueBook.build(configs or [], ledger, pods, localqueues or []),
                    podgroups or [], unbound or [], pods)
    names = {node.get("metadata", {}).get("name") for node in nodes}
    view.gpus_used = sum(gpus for node, gpus in used.items() if node in names)
    view.gpus_outside_queues = max(0, view.gpus_used - sum(q.in_use for q in view.queues))
    return view


def _tree_order(items: list[SwitchUsage], order: dict[str, int]) -> list[SwitchUsage]:
    """Each switch followed by its children: spine-0, leaf-0, leaf-1, spine-1, ..."""
    children: dict[str | None, list[SwitchUsage]] = defaultdict(list)
    for item in items:
        children[item.parent if order[item.level] else None].append(item)
    out: list[SwitchUsage] = []

    def walk(parent: str | None, depth: int) -> None:
        for item in sorted(children.get(parent, []), key=lambda s: _natural(s.switch)):
            if order[item.level] != depth:
                continue
            out.append(item)
            walk(item.switch, depth + 1)

    walk(None, 0)
    return out


def _job_row(tj: dict[str, Any], now: datetime) -> tuple[JobRow, PendingGang | None]:
    meta = tj.get("metadata") or {}
    status = tj.get("status") or {}
    spec = tj.get("spec") or {}
    checkpoint = status.get("lastCheckpoint") or {}
    created = parse_time(meta.get("creationTimestamp"))
    attempt = status.get("attempt")
    checkpointed = parse_time(checkpoint.get("time"))
    row = JobRow(
        namespace=meta.get("namespace", ""),
        name=meta.get("name", ""),
        phase=status.get("phase") or "New",
        restarts=int(status.get("restarts") or 0),
        attempt=attempt if isinstance(attempt, int) else None,
        nodes=int(spec.get("nodes") or 0),
        checkpoint=checkpoint.get("path"),
        step=checkpoint.get("step"),
        age_seconds=(now - created).total_seconds() if created else 0.0,
        checkpoint_age=(now - checkpointed).total_seconds() if checkpointed else None,
    )
    pending = None
    if row.phase in (PENDING, RESTARTING, "New"):
        restart_at = parse_time(status.get("restartAt"))
        if restart_at is not None and restart_at > now:
            reason = f"restart backoff until {status['restartAt']}"
        else:
            reason = status.get("pendingReason") or "waiting for the operator"
        pending = PendingGang(row.namespace, row.name, status.get("gang"), reason)
    return row, pending


# --- reading the cluster -----------------------------------------------------------------


async def read_view(kube: Kube, namespace: str | None = None) -> ResourceView:
    # Only pods that hold capacity: bound, not finished.
    active = "spec.nodeName!=,status.phase!=Succeeded,status.phase!=Failed"
    nodes, pods = await asyncio.gather(
        kube.list(node_path()), kube.list(pod_path(), params={"fieldSelector": active}))
    waiting = "spec.nodeName=,status.phase=Pending"
    unbound = await kube.list(pod_path(namespace), params={"fieldSelector": waiting})
    tjs = await _optional(kube, trainingjob_path(namespace))  # no CRD installed: none
    podgroups = await _optional(kube, podgroup_path(namespace))
    configs = await _scheduler_configs(kube)
    queues = [q for doc in configs for q in doc.get("queues") or [] if isinstance(q, dict)]
    localqueues = await _readable(kube, localqueue_path(namespace))
    return summarize(nodes, pods, tjs, datetime.now(UTC), queues, podgroups, unbound,
                     await _scheduler_ledger(kube), configs, localqueues)


async def _readable(kube: Kube, path: str) -> list[dict[str, Any]]:
    """The objects of a kind one may lack the CRD or the right to read: none then."""
    try:
        return await kube.list(path)
    except ApiError:
        return []


async def _optional(kube: Kube, path: str) -> list[dict[str, Any]]:
    """The objects of a kind whose CRD may be absent (404: none)."""
    try:
        return await kube.list(path)
    except ApiError as exc:
        if not exc.not_found:
            raise
        return []


def scheduler_queues(configmaps: Iterable[dict[str, Any]]) -> list[dict[str, Any]]:
    """The queue entries of every trainmaster-scheduler config map."""
    out: list[dict[str, Any]] = []
    for cm in configmaps:
        text = (cm.get("data") or {}).get("config.yaml")
        if not text:
            continue
        try:
            doc = yaml.safe_load(text) or {}
        except yaml.YAMLError:
            continue
        out.extend(q for q in doc.get("queues") or [] if isinstance(q, dict))
    return out


async def _scheduler_configs(kube: Kube) -> list[dict[str, Any]]:
    """Every trainmaster-scheduler config in the cluster (queues, quotas, cohorts, fair
    sharing); none when it cannot be read (no rights, no scheduler)."""
    selector = "app.kubernetes.io/component=scheduler,app.kubernetes.io/part-of=trainmaster"
    try:
        maps = await kube.list("/api/v1/configmaps", selector)
    except ApiError:
        return []
    return scheduler_configs(maps)


async def _scheduler_ledger(kube: Kube) -> list[dict[str, Any]] | None:
    """The queue entries every trainmaster-scheduler published (its ledger ConfigMap);
    None when there is none or it cannot be read, so the caller counts by labels."""
    selector = (f"{APP_COMPONENT_LABEL}={QUEUE_LEDGER_COMPONENT},"
                f"{APP_PART_OF_LABEL}=trainmaster")
    try:
        maps = await kube.list("/api/v1/configmaps", selector)
    except ApiError:
        return None
    return ledger_entries(maps)


def with_live_progress(view: ResourceView, live: Mapping[JobKey, LiveProgress] | None,
                       note: str = "") -> ResourceView:
    """The view's jobs with Prometheus' step, step rate and checkpoint age where it has
    them (``job_progress``, as the UI's jobs view)."""
    for row in view.jobs:
        got = job_progress(live, row.namespace, row.name, step=None, step_rate=None,
                           checkpoint_age=row.checkpoint_age)
        row.current_step, row.step_rate, row.checkpoint_age, row.progress_from = (
            got.step, got.step_rate, got.checkpoint_age, got.source)
    view.progress_note = note
    return view


def collect_view(kubeconfig: Path | None, namespace: str | None = None,
                 prometheus: str | None = None) -> ResourceView:
    """The view of the cluster the kubeconfig rule picks (``choose_kubeconfig``).
    ``prometheus``: its URL for live step rates; None: the operator's Prometheus pod in the
    cluster if there is one (``discover_prometheus``); "off": none."""
    with SyncKube.connect(kubeconfig) as kube:
        view = kube.run(read_view(kube.kube, namespace))
        url = prometheus if prometheus else discover_prometheus(kube)
    if url is None or url == "off":
        return with_live_progress(view, None, "no Prometheus: progress from the TrainingJobs")
    try:
        live = live_progress(url, timeout=3.0)
    except PrometheusError as exc:
        return with_live_progress(view, None, f"{exc}; progress from the TrainingJobs")
    return with_live_progress(view, live, f"step rates and checkpoint ages from {url}")

