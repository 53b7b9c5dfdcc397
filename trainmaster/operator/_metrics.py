"""The operator's Prometheus metrics: what it sees of each node, served on /metrics.

Node readiness comes from here rather than from kube-state-metrics, so the GPUNodeNotReady
alert needs nothing the stack does not deploy. A private registry (not the process-global
one), so two operators in one process (tests) never collide.
"""

from __future__ import annotations

import contextlib
from collections.abc import Mapping
from typing import Any

from prometheus_client import CollectorRegistry, Counter, Gauge

from trainmaster.api import GPU_RESOURCE, NODE_READY, UNHEALTHY_TAINT
from trainmaster.metrics_server import MetricsServer
from trainmaster.operator._model import NodeHealth

"""The operator's /metrics port in its pod (the scheduler's is 10259)."""


def _gpus(node: Mapping[str, Any]) -> float:
    raw = ((node.get("status") or {}).get("allocatable") or {}).get(GPU_RESOURCE, 0)
    try:
        return float(raw)
    except (TypeError, ValueError):
        return 0.0


def _ready(node: Mapping[str, Any]) -> bool:
    for cond in (node.get("status") or {}).get("conditions") or []:
        if cond.get("type") == NODE_READY:
            return bool(cond.get("status") == "True")
    return False


class OperatorMetrics:
    def __init__(self) -> None:
        self.registry = CollectorRegistry(auto_describe=True)
        ns, r = "trainmaster_operator", self.registry
        self.node_ready = Gauge(
            f"{ns}_node_ready", "1 if the node's Ready condition is True, else 0.", ["node"],
            registry=r,
        )
        self.node_healthy = Gauge(
            f"{ns}_node_healthy", "1 if the operator finds no problem with the node (Ready and "
            "no unhealthy condition such as GPUHealthy=False or NICHealthy=False).", ["node"],
            registry=r,
        )  # fmt: skip
        self.node_fenced = Gauge(
            f"{ns}_node_fenced", f"1 while the node carries the {UNHEALTHY_TAINT} taint.",
            ["node"], registry=r,
        )  # fmt: skip
        self.node_gpus = Gauge(
            f"{ns}_node_gpus", "Allocatable GPUs of the node.", ["node"], registry=r
        )
        self.node_topology_known = Gauge(
            f"{ns}_node_topology_known", "1 if the GPU node has a topology.trainmaster.io "
            "label for every level, 0 if some level is unknown.", ["node"], registry=r,
        )  # fmt: skip
        self.fences = Counter(f"{ns}_fences", "Nodes fenced by the operator.", registry=r)
        self._http = MetricsServer(r)

    def observe_node(self, node: Mapping[str, Any], health: NodeHealth) -> None:
        name = str((node.get("metadata") or {}).get("name", ""))
        self.node_ready.labels(name).set(1 if _ready(node) else 0)
        self.node_healthy.labels(name).set(1 if health.problem is None else 0)
        self.node_fenced.labels(name).set(1 if health.fenced else 0)
        self.node_gpus.labels(name).set(_gpus(node))

    def forget_node(self, name: str) -> None:
        for gauge in (self.node_ready, self.node_healthy, self.node_fenced, self.node_gpus,
                      self.node_topology_known):
            with contextlib.suppress(KeyError):  # never seen
                gauge.remove(name)

    def serve(self, address: str, port: int) -> int:
        """Start the /metrics HTTP server in a thread; returns the bound port."""
        return self._http.serve(address, port)

    def stop(self) -> None:
        self._http.stop()
