"""`trainmaster status`: the cluster as the operator sees it, from a kubeconfig alone.

GPUs used and free per switch at every topology level (spine, leaf, ...), training jobs
with phase, restarts, last checkpoint and age, fenced nodes, and gangs still pending with
the reason. `summarize` is pure; `collect_view` reads the API; `render_view` prints.
"""

from __future__ import annotations

import json
from collections import defaultdict
from dataclasses import asdict, dataclass, field
from datetime import datetime
from pathlib import Path
from typing import Any

from trainmaster.objects import (
    GPU_RESOURCE,
    TOPOLOGY_PREFIX,
    TRAININGJOB_GROUP,
    TRAININGJOB_PLURAL,
    TRAININGJOB_VERSION,
    UNHEALTHY_TAINT,
)
from trainmaster.operator._fence import fenced_record, unfence_patch
from trainmaster.operator._model import PENDING, RESTARTING, parse_time, utcnow


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


@dataclass
class FencedNode:
    name: str
    switch: str | None
    reason: str
    since: str | None


@dataclass
class PendingGang:
    namespace: str
    job: str
    gang: str | None
    reason: str


@dataclass
class ResourceView:
    levels: list[str]
    switches: list[SwitchUsage] = field(default_factory=list)
    jobs: list[JobRow] = field(default_factory=list)
    fenced: list[FencedNode] = field(default_factory=list)
    pending: list[PendingGang] = field(default_factory=list)

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


def _gpu_request(pod: dict[str, Any]) -> int:
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
    return any(c.get("type") == "Ready" and c.get("status") == "True" for c in conds)


def summarize(
    nodes: list[dict[str, Any]],
    pods: list[dict[str, Any]],
    trainingjobs: list[dict[str, Any]],
    now: datetime,
) -> ResourceView:
    levels = topology_levels(nodes)
    used: dict[str, int] = defaultdict(int)
    for pod in pods:
        phase = (pod.get("status") or {}).get("phase")
        node = (pod.get("spec") or {}).get("nodeName")
        if node and phase not in ("Succeeded", "Failed"):
            used[node] += _gpu_request(pod)
    view = ResourceView(levels)
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
    for tj in trainingjobs:
        row, pending = _job_row(tj, now)
        view.jobs.append(row)
        if pending is not None:
            view.pending.append(pending)
    view.jobs.sort(key=lambda j: (j.namespace, j.name))
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


def _items(response: Any) -> list[dict[str, Any]]:
    items: list[dict[str, Any]] = json.loads(response.data).get("items") or []
    return items


def collect_view(kubeconfig: Path | None, namespace: str | None = None) -> ResourceView:
    from kubernetes import client

    from trainmaster.kube import sync_client

    api = sync_client(kubeconfig)
    core = client.CoreV1Api(api)
    custom = client.CustomObjectsApi(api)
    # Raw JSON: no model objects for hundreds of nodes and pods.
    nodes = _items(core.list_node(_preload_content=False))
    pods = _items(core.list_pod_for_all_namespaces(
        field_selector="spec.nodeName!=,status.phase!=Succeeded,status.phase!=Failed",
        _preload_content=False))
    try:
        if namespace:
            tjs = custom.list_namespaced_custom_object(
                TRAININGJOB_GROUP, TRAININGJOB_VERSION, namespace, TRAININGJOB_PLURAL)
        else:
            tjs = custom.list_cluster_custom_object(
                TRAININGJOB_GROUP, TRAININGJOB_VERSION, TRAININGJOB_PLURAL)
    except client.ApiException as exc:
        if exc.status != 404:  # no TrainingJob CRD installed: no jobs
            raise
        tjs = {"items": []}
    return summarize(nodes, pods, list(tjs.get("items") or []), utcnow())


def unfence_nodes(kubeconfig: Path | None, names: list[str]) -> dict[str, bool]:
    from kubernetes import client

    from trainmaster.kube import sync_client

    core = client.CoreV1Api(sync_client(kubeconfig))
    done: dict[str, bool] = {}
    for name in names:
        done[name] = False
        for _ in range(5):
            node = json.loads(core.read_node(name, _preload_content=False).data)
            patch = unfence_patch(node)
            if patch is None:
                break
            try:
                core.patch_node(name, patch, _content_type="application/merge-patch+json")
            except client.ApiException as exc:
                if exc.status == 409:
                    continue
                raise
            done[name] = True
            break
    return done


# --- printing --------------------------------------------------------------------------


def age(seconds: float) -> str:
    seconds = int(seconds)
    if seconds < 120:
        return f"{seconds}s"
    minutes = seconds // 60
    if minutes < 120:
        return f"{minutes}m"
    hours = minutes // 60
    if hours < 48:
        return f"{hours}h{minutes % 60:02d}m" if hours < 10 else f"{hours}h"
    return f"{hours // 24}d"


def render_view(view: ResourceView) -> None:
    from rich.console import Console
    from rich.table import Table

    console = Console()
    gpus = Table(title="GPUs by switch")
    for col in ("switch", "level", "nodes", "usable", "GPUs", "used", "free", "fenced"):
        gpus.add_column(col, justify="left" if col in ("switch", "level") else "right")
    depth = {level: i for i, level in enumerate(view.levels)}
    for s in view.switches:
        gpus.add_row("  " * depth[s.level] + s.switch, s.level, str(s.nodes), str(s.usable),
                     str(s.gpus), str(s.used), str(s.free),
                     f"[red]{s.fenced}[/]" if s.fenced else "0")
    console.print(gpus)
    jobs = Table(title="Training jobs")
    for col in ("job", "phase", "restarts", "nodes", "last checkpoint", "age"):
        jobs.add_column(col, justify="right" if col in ("restarts", "nodes", "age") else "left")
    colors = {"Running": "green", "Failed": "red", "Restarting": "yellow",
              "Succeeded": "blue"}
    for j in view.jobs:
        ckpt = f"{j.checkpoint} (step {j.step})" if j.checkpoint and j.step is not None \
            else (j.checkpoint or "-")
        color = colors.get(j.phase, "white")
        jobs.add_row(f"{j.namespace}/{j.name}", f"[{color}]{j.phase}[/]", str(j.restarts),
                     str(j.nodes), ckpt, age(j.age_seconds))
    console.print(jobs)
    if view.fenced:
        fenced = Table(title="Fenced nodes")
        for col in ("node", "switch", "reason", "since"):
            fenced.add_column(col)
        for f in view.fenced:
            fenced.add_row(f.name, f.switch or "-", f.reason, f.since or "-")
        console.print(fenced)
    else:
        console.print("no fenced nodes")
    if view.pending:
        pending = Table(title="Pending gangs")
        for col in ("job", "gang", "reason"):
            pending.add_column(col)
        for p in view.pending:
            pending.add_row(f"{p.namespace}/{p.job}", p.gang or "-", p.reason)
        console.print(pending)
    else:
        console.print("no pending gangs")
