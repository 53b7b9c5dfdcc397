"""GPU monitoring: the exporter DaemonSet and Service, Prometheus-operator objects for
scraping and alerting, and a Grafana dashboard ConfigMap."""

from __future__ import annotations

import json
from typing import Any

from trainmaster.api import APP_COMPONENT_LABEL, APP_INSTANCE_LABEL, APP_NAME_LABEL, app_labels
from trainmaster.objects._netpol import allow_metrics
from trainmaster.objects._nodeagent import build_nic_agent
from trainmaster.spec import ClusterSpec

RESTART_WINDOW = "15m"
"""How long TrainingGangRestarted fires after a gang restart."""


def _alert_rules(spec: ClusterSpec) -> list[dict[str, Any]]:
    alerts = spec.monitoring.alerts
    rules: list[dict[str, Any]] = []
    # The DCGM_* series come from the GPU exporter: without it these rules would watch nothing.
    dcgm = spec.monitoring.gpu_exporter.enabled
    if dcgm and alerts.xid_errors:
        rules.append(
            {
                "alert": "GPUXidError",
                "expr": "max by (Hostname, gpu) (DCGM_FI_DEV_XID_ERRORS) > 0",
                "for": "0m",
                "labels": {"severity": "critical"},
                "annotations": {
                    "summary": "GPU {{ $labels.gpu }} on {{ $labels.Hostname }}"
                    " reported Xid {{ $value }}"
                },
            }
        )
    if dcgm:
        rules.append(
            {
                "alert": "GPUEccDoubleBitErrors",
                "expr": "increase(DCGM_FI_DEV_ECC_DBE_VOL_TOTAL[1h]) >= "
                f"{alerts.ecc_errors_per_hour}",
                "for": "0m",
                "labels": {"severity": "critical"},
                "annotations": {"summary": "double-bit ECC errors on {{ $labels.Hostname }}"},
            }
        )
    rules.append(
        {
            "alert": "TrainingNoProgress",
            # The launcher labels its series `trainingjob` (Prometheus owns `job`).
            "expr": "time() - max by (namespace, trainingjob) "
            "(trainmaster_job_last_heartbeat_timestamp_seconds) > "
            f"{alerts.no_progress_minutes * 60}",
            "for": "0m",
            "labels": {"severity": "warning"},
            "annotations": {
                "summary": "job {{ $labels.trainingjob }} made no progress for "
                f"{alerts.no_progress_minutes} minutes"
            },
        }
    )
    rules.append(
        {
            "alert": "TrainingGangRestarted",
            # Each launcher reports its gang attempt; a restart brings pods (new series) with
            # a higher attempt while the old series are still in the window. A restart is an
            # event, so `for: 0m`: waiting would only delay the page; the window keeps the
            # alert firing for RESTART_WINDOW so that it reaches Alertmanager and is seen.
            "expr": "max by (namespace, trainingjob) "
            f"(max_over_time(trainmaster_job_attempt[{RESTART_WINDOW}])) > "
            "min by (namespace, trainingjob) "
            f"(min_over_time(trainmaster_job_attempt[{RESTART_WINDOW}]))",
            "for": "0m",
            "labels": {"severity": "warning"},
            "annotations": {
                "summary": "job {{ $labels.trainingjob }}'s gang restarted (attempt "
                "{{ $value }}) in the last " + RESTART_WINDOW
            },
        }
    )
    if spec.monitoring.nic_agent.enabled:
        rules.append(
            {
                "alert": "NodeNICUnhealthy",
                # The NIC agent's own verdict (every port ACTIVE/LinkUp, no device missing,
                # no flap), the same one that sets the node's NICHealthy condition and
                # makes the operator fence it; `reason` names what failed.
                "expr": "max by (node, reason) (trainmaster_nic_healthy) == 0",
                "for": "1m",
                "labels": {"severity": "critical"},
                "annotations": {
                    "summary": "node {{ $labels.node }}'s RDMA NICs are unhealthy: "
                    "{{ $labels.reason }}"
                },
            }
        )
    rules.append(
        {
            "alert": "GPUNodeNotReady",
            # The operator's view of each node (trainmaster_operator_node_*), so no
            # kube-state-metrics is needed; only nodes with GPUs page.
            "expr": "max by (node) (trainmaster_operator_node_ready) == 0 "
            "and on (node) max by (node) (trainmaster_operator_node_gpus) > 0",
            "for": f"{alerts.node_not_ready_minutes}m",
            "labels": {"severity": "critical"},
            "annotations": {
                "summary": "node {{ $labels.node }} NotReady for "
                f"{alerts.node_not_ready_minutes} minutes"
            },
        }
    )
    return rules


def _dashboard(spec: ClusterSpec) -> dict[str, Any]:
    def panel(i: int, title: str, expr: str) -> dict[str, Any]:
        return {
            "id": i,
            "type": "timeseries",
            "title": title,
            "gridPos": {"x": (i % 2) * 12, "y": (i // 2) * 8, "w": 12, "h": 8},
            "targets": [{"expr": expr, "refId": "A"}],
        }

    queries = [
        ("Training step", "max by (trainingjob) (trainmaster_job_step)"),
        ("Checkpoint step", "max by (trainingjob) (trainmaster_job_checkpoint_step)"),
        ("Free GPUs", "max(trainmaster_scheduler_free_gpus)"),
        ("GPU fragmentation", "max(trainmaster_scheduler_gpu_fragmentation_ratio)"),
        ("Unhealthy nodes", "count(trainmaster_operator_node_healthy == 0) or vector(0)"),
    ]
    if spec.monitoring.gpu_exporter.enabled:
        queries = [
            ("GPU utilisation", "avg by (Hostname) (DCGM_FI_DEV_GPU_UTIL)"),
            ("GPU memory used", "sum by (Hostname) (DCGM_FI_DEV_FB_USED)"),
            ("Xid errors", "max by (Hostname) (DCGM_FI_DEV_XID_ERRORS)"),
            *queries,
        ]
    return {
        "title": "trainmaster: GPUs and training",
        "uid": "trainmaster-gpus",
        "schemaVersion": 39,
        "panels": [panel(i, title, expr) for i, (title, expr) in enumerate(queries)],
    }


def build_monitoring(spec: ClusterSpec) -> list[dict[str, Any]]:
    mon, ns, cluster = spec.monitoring, spec.metadata.namespace, spec.metadata.name
    labels = app_labels("gpu-exporter", "monitoring", cluster)
    selector = {APP_NAME_LABEL: "gpu-exporter", APP_INSTANCE_LABEL: cluster}
    interval = f"{mon.scrape_interval_seconds}s"
    objs: list[dict[str, Any]] = [*build_nic_agent(spec)]
    if mon.gpu_exporter.enabled:
        objs += [
            {
                "apiVersion": "apps/v1",
                "kind": "DaemonSet",
                "metadata": {"name": f"{cluster}-gpu-exporter", "namespace": ns, "labels": labels},
                "spec": {
                    "selector": {"matchLabels": selector},
                    "template": {
                        "metadata": {"labels": labels},
                        "spec": {
                            # It reads GPUs, not the API: no token.
                            "automountServiceAccountToken": False,
                            "nodeSelector": {"nvidia.com/gpu.present": "true"},
                            "tolerations": [{"operator": "Exists"}],
                            "containers": [
                                {
                                    "name": "exporter",
                                    "image": mon.gpu_exporter.image,
                                    "ports": [{"name": "metrics", "containerPort": 9400}],
                                    # DCGM reads the GPUs' profiling counters: needs SYS_ADMIN.
                                    "securityContext": {"privileged": True},
                                    "resources": {"requests": {"cpu": "100m", "memory": "256Mi"}},
                                }
                            ],
                        },
                    },
                },
            },
            {
                "apiVersion": "v1",
                "kind": "Service",
                "metadata": {"name": f"{cluster}-gpu-exporter", "namespace": ns, "labels": labels},
                "spec": {
                    "selector": selector,
                    "clusterIP": "None",
                    "ports": [{"name": "metrics", "port": 9400}],
                },
            },
            allow_metrics(spec, f"{cluster}-gpu-exporter-metrics", ns, labels, selector, 9400),
            {
                "apiVersion": "monitoring.coreos.com/v1",
                "kind": "ServiceMonitor",
                "metadata": {"name": f"{cluster}-gpu-exporter", "namespace": ns, "labels": labels},
                "spec": {
                    "selector": {"matchLabels": selector},
                    "endpoints": [{"port": "metrics", "interval": interval}],
                },
            },
        ]
    objs += [
        {
            "apiVersion": "monitoring.coreos.com/v1",
            "kind": "PodMonitor",
            "metadata": {
                "name": f"{cluster}-training",
                "namespace": ns,
                "labels": app_labels("training", "monitoring", cluster),
            },
            "spec": {
                "selector": {
                    "matchLabels": {
                        APP_COMPONENT_LABEL: "worker",
                        APP_INSTANCE_LABEL: cluster,
                    }
                },
                "podMetricsEndpoints": [{"port": "metrics", "interval": interval}],
            },
        },
        {
            "apiVersion": "monitoring.coreos.com/v1",
            "kind": "PrometheusRule",
            "metadata": {
                "name": f"{cluster}-alerts",
                "namespace": ns,
                "labels": app_labels("alerts", "monitoring", cluster),
            },
            "spec": {"groups": [{"name": "trainmaster", "rules": _alert_rules(spec)}]},
        },
    ]
    if mon.dashboards:
        objs.append(
            {
                "apiVersion": "v1",
                "kind": "ConfigMap",
                "metadata": {
                    "name": f"{cluster}-dashboard",
                    "namespace": ns,
                    "labels": {
                        **app_labels("dashboard", "monitoring", cluster),
                        "grafana_dashboard": "1",
                    },
                },
                "data": {"trainmaster.json": json.dumps(_dashboard(spec), indent=2)},
            }
        )
    return objs
