"""How a trainmaster Deployment is scraped on the pod network: its /metrics listens on the
pod's IP (never 0.0.0.0 nor loopback), a named container port, a Service and a
Prometheus-operator ServiceMonitor that selects it, and a NetworkPolicy admitting the
Prometheus namespace."""

from __future__ import annotations

from typing import Any

from trainmaster.objects._netpol import allow_metrics
from trainmaster.spec import ClusterSpec

POD_IP_ENV: dict[str, Any] = {
    "name": "POD_IP",
    "valueFrom": {"fieldRef": {"fieldPath": "status.podIP"}},
}
"""The downward API's pod IP, for `--metrics-address $(POD_IP)`."""

METRICS_ARGS = ("--metrics-address", "$(POD_IP)")


def metrics_port(port: int) -> dict[str, Any]:
    return {"name": "metrics", "containerPort": port, "protocol": "TCP"}


def scrape_objects(
    spec: ClusterSpec,
    name: str,
    namespace: str,
    labels: dict[str, str],
    selector: dict[str, str],
    port: int,
) -> list[dict[str, Any]]:
    """Service, ServiceMonitor and NetworkPolicy for the pods matching `selector`."""
    return [
        {
            "apiVersion": "v1",
            "kind": "Service",
            "metadata": {"name": f"{name}-metrics", "namespace": namespace, "labels": labels},
            "spec": {
                "selector": selector,
                "ports": [{"name": "metrics", "port": port, "targetPort": "metrics"}],
            },
        },
        {
            "apiVersion": "monitoring.coreos.com/v1",
            "kind": "ServiceMonitor",
            "metadata": {"name": name, "namespace": namespace, "labels": labels},
            "spec": {
                "selector": {"matchLabels": labels},
                "endpoints": [
                    {"port": "metrics", "interval": f"{spec.monitoring.scrape_interval_seconds}s"}
                ],
            },
        },
        allow_metrics(spec, f"{name}-metrics", namespace, labels, selector, port),
    ]
