"""Kubernetes Events the operator posts: restarts, fencing, failures. Best effort: a lost
Event never blocks a recovery (the same facts are in the TrainingJob's status)."""

from __future__ import annotations

import logging
import socket
from datetime import datetime
from typing import Any

from trainmaster.api import REPORTING_COMPONENT_PREFIX, format_seconds
from trainmaster.kubeclient import CONFLICT, Kube, event_path, is_status

COMPONENT = "trainmaster-operator"
NODE_EVENT_NAMESPACE = "default"
"""Events about cluster-scoped objects (Nodes) live here, as kubelet's do."""

log = logging.getLogger(__name__)


def involved(obj: dict[str, Any]) -> dict[str, Any]:
    meta = obj.get("metadata") or {}
    ref = {
        "apiVersion": obj.get("apiVersion", "v1"),
        "kind": obj.get("kind", ""),
        "name": meta.get("name", ""),
        "uid": meta.get("uid", ""),
    }
    if meta.get("namespace"):
        ref["namespace"] = meta["namespace"]
    return ref


def build_event(
    obj: dict[str, Any], kind: str, reason: str, message: str, now: datetime,
    name: str | None = None,
) -> dict[str, Any]:
    """A v1 Event. With a `name` it is idempotent: posting it twice makes one Event."""
    ref = involved(obj)
    namespace = ref.get("namespace", NODE_EVENT_NAMESPACE)
    stamp = format_seconds(now)
    meta: dict[str, Any] = {"namespace": namespace}
    if name:
        meta["name"] = name
    else:
        meta["generateName"] = f"{ref['name']}."
    return {
        "apiVersion": "v1",
        "kind": "Event",
        "metadata": meta,
        "involvedObject": ref,
        "type": kind,
        "reason": reason,
        # The API limits an Event message to 1 KiB.
        "message": message[:1024],
        "source": {"component": COMPONENT},
        "reportingComponent": f"{REPORTING_COMPONENT_PREFIX}{COMPONENT}",
        "reportingInstance": socket.gethostname()[:128],
        "firstTimestamp": stamp,
        "lastTimestamp": stamp,
        "count": 1,
    }


async def post(
    kube: Kube, obj: dict[str, Any], kind: str, reason: str, message: str, now: datetime,
    name: str | None = None,
) -> None:
    event = build_event(obj, kind, reason, message, now, name)
    try:
        await kube.post(event_path(event["metadata"]["namespace"]), event)
    except Exception as exc:  # never let reporting break recovery
        if is_status(exc, CONFLICT) and name:
            return  # posted before, by us or by the operator we replaced
        log.warning("could not post Event %s for %s: %s", reason, event["involvedObject"], exc)
