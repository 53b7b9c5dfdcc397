"""Fencing: cordon an unhealthy node and taint it trainmaster.io/unhealthy:NoSchedule so no
new gang lands there. Sticky on purpose: a GPU that threw an Xid error is not trusted again
until a person (or `trainmaster operator unfence`) says so.

The patch builders are pure; the node's resourceVersion rides along so a concurrent taint
change (the node lifecycle controller adds its own not-ready taints) is never overwritten.
"""

from __future__ import annotations

import json
from collections.abc import Callable
from datetime import datetime
from pathlib import Path
from typing import Any

from trainmaster.api import FENCED_ANNOTATION, UNHEALTHY_TAINT, format_time
from trainmaster.kubeclient import Kube, SyncKube, node_path, retry_on_conflict
from trainmaster.operator._faults import taint_value


def fence_patch(node: dict[str, Any], problem: str, now: datetime) -> dict[str, Any] | None:
    """The merge patch that fences `node`, or None when it already is."""
    meta = node.get("metadata") or {}
    spec = node.get("spec") or {}
    taints = list(spec.get("taints") or [])
    tainted = any(t.get("key") == UNHEALTHY_TAINT for t in taints)
    cordoned = bool(spec.get("unschedulable"))
    if tainted and cordoned:
        return None
    patch: dict[str, Any] = {
        "metadata": {"resourceVersion": meta.get("resourceVersion")},
        "spec": {"unschedulable": True},
    }
    if FENCED_ANNOTATION not in (meta.get("annotations") or {}):
        record = {"reason": problem, "time": format_time(now), "cordoned": not cordoned}
        patch["metadata"]["annotations"] = {FENCED_ANNOTATION: json.dumps(record)}
    if not tainted:
        taints.append({"key": UNHEALTHY_TAINT, "value": taint_value(problem),
                       "effect": "NoSchedule"})
        patch["spec"]["taints"] = taints
    return patch


def unfence_patch(node: dict[str, Any]) -> dict[str, Any] | None:
    """The merge patch that lifts our fence, or None when there is none. The node is
    uncordoned only if we cordoned it."""
    meta = node.get("metadata") or {}
    spec = node.get("spec") or {}
    taints = list(spec.get("taints") or [])
    kept = [t for t in taints if t.get("key") != UNHEALTHY_TAINT]
    raw = (meta.get("annotations") or {}).get(FENCED_ANNOTATION)
    if raw is None and len(kept) == len(taints):
        return None
    try:
        we_cordoned = bool(json.loads(raw).get("cordoned")) if raw else False
    except (ValueError, AttributeError):
        we_cordoned = False
    patch: dict[str, Any] = {
        "metadata": {"resourceVersion": meta.get("resourceVersion"),
                     "annotations": {FENCED_ANNOTATION: None}},
        "spec": {"taints": kept or None},
    }
    if we_cordoned:
        patch["spec"]["unschedulable"] = None
    return patch


def fenced_record(node: dict[str, Any]) -> dict[str, Any] | None:
    """Our fence annotation, parsed; None when the node is not fenced by us."""
    raw = ((node.get("metadata") or {}).get("annotations") or {}).get(FENCED_ANNOTATION)
    if not raw:
        return None
    try:
        record = json.loads(raw)
    except ValueError:
        return {"reason": raw}
    return record if isinstance(record, dict) else {"reason": raw}


async def patch_node(kube: Kube, name: str,
                     make_patch: Callable[[dict[str, Any]], dict[str, Any] | None]) -> bool:
    """Read the node, patch it with ``make_patch(node)`` (None: nothing to do), again
    from a fresh read while a concurrent update wins (409); True if this call changed it."""

    async def attempt() -> bool:
        patch = make_patch(await kube.get(node_path(name)))
        if patch is None:
            return False
        await kube.patch(node_path(name), patch)
        return True

    return await retry_on_conflict(attempt)


async def fence(kube: Kube, name: str, problem: str, now: datetime) -> bool:
    """Fence a node; True if this call changed it."""
    return await patch_node(kube, name, lambda node: fence_patch(node, problem, now))


async def unfence(kube: Kube, name: str) -> bool:
    """Lift trainmaster's fence; True if the node was fenced."""
    return await patch_node(kube, name, unfence_patch)


def unfence_nodes(kubeconfig: Path | None, names: list[str]) -> dict[str, bool]:
    """Lift the fence of each node (``trainmaster operator unfence``); node -> whether it
    was fenced."""
    with SyncKube.connect(kubeconfig) as kube:
        return {name: kube.run(unfence(kube.kube, name)) for name in names}
