"""Small hand-made worlds (the API objects the UI watches) for the views' tests."""

from __future__ import annotations

from datetime import datetime, timedelta
from typing import Any

from trainmaster.api import UTC, format_time

T0 = datetime(2026, 1, 1, 12, 0, 0, tzinfo=UTC)


def at(seconds: float) -> str:
    return format_time(T0 + timedelta(seconds=seconds))


def node(name: str, leaf: str, spine: str = "spine-0", gpus: int = 8,
         **spec: Any) -> dict[str, Any]:
    return {"metadata": {"name": name, "uid": name, "labels": {
        "topology.trainmaster.io/spine": spine, "topology.trainmaster.io/leaf": leaf}},
        "spec": dict(spec),
        "status": {"allocatable": {"nvidia.com/gpu": str(gpus), "cpu": "64", "pods": "110"},
                   "conditions": [{"type": "Ready", "status": "True"}]}}


def pod(name: str, group: str, node_name: str | None, gpus: int = 8, ns: str = "ml",
        queue: str | None = None, priority: int = 0) -> dict[str, Any]:
    labels = {"scheduling.x-k8s.io/pod-group": group}
    if queue:
        labels["kueue.x-k8s.io/queue-name"] = queue
    spec: dict[str, Any] = {"schedulerName": "trainmaster-scheduler", "priority": priority,
                            "containers": [{"name": "c", "resources": {"requests": {
                                "nvidia.com/gpu": str(gpus)}}}]}
    if node_name:
        spec["nodeName"] = node_name
    return {"metadata": {"name": name, "namespace": ns, "uid": f"{ns}-{name}",
                         "labels": labels, "creationTimestamp": at(0)},
            "spec": spec, "status": {"phase": "Running" if node_name else "Pending"}}


def podgroup(name: str, members: int, ns: str = "ml", level: str = "leaf",
             mode: str = "required") -> dict[str, Any]:
    return {"metadata": {"name": name, "namespace": ns, "uid": f"pg-{name}",
                         "creationTimestamp": at(0),
                         "annotations": {"trainmaster.io/topology-domain": level,
                                         "trainmaster.io/topology-mode": mode}},
            "spec": {"minMember": members}}
