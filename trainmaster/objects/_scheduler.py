"""The bundled trainmaster-scheduler: identity, least-privilege RBAC, config, Deployment,
and a PriorityClass per queue."""

from __future__ import annotations

from typing import Any

import yaml

from trainmaster.objects._jobs import priority_class_name
from trainmaster.objects._labels import app_labels
from trainmaster.objects._rbac import service_account_with_cluster_role
from trainmaster.spec import ClusterSpec

# Exactly what the scheduler reads and writes; nothing more.
SCHEDULER_RULES: list[dict[str, Any]] = [
    {"apiGroups": [""], "resources": ["nodes"], "verbs": ["get", "list", "watch"]},
    # delete: undoing a partly bound gang deletes its bound pods so their controller
    # recreates them whole (docs/scheduler.md).
    {"apiGroups": [""], "resources": ["pods"], "verbs": ["get", "list", "watch", "delete"]},
    {"apiGroups": [""], "resources": ["pods/binding"], "verbs": ["create"]},
    {"apiGroups": [""], "resources": ["pods/status"], "verbs": ["patch", "update"]},
    {
        "apiGroups": ["", "events.k8s.io"],
        "resources": ["events"],
        "verbs": ["create", "patch", "update"],
    },
    {
        "apiGroups": ["scheduling.x-k8s.io"],
        "resources": ["podgroups"],
        "verbs": ["get", "list", "watch"],
    },
    {
        "apiGroups": ["scheduling.x-k8s.io"],
        "resources": ["podgroups/status"],
        "verbs": ["patch", "update"],
    },
]
LEASE_RULES: list[dict[str, Any]] = [
    {
        "apiGroups": ["coordination.k8s.io"],
        "resources": ["leases"],
        "verbs": ["get", "list", "watch", "create", "update", "patch"],
    },
]


def scheduler_config(spec: ClusterSpec) -> dict[str, Any]:
    """The scheduler's own config file (what `trainmaster-scheduler --config` reads)."""
    sched = spec.scheduler
    return {
        "schedulerName": sched.name,
        "namespace": spec.metadata.namespace,
        "levels": list(spec.topology.levels),
        "gangTimeoutSeconds": sched.gang_timeout_seconds,
        "preemption": sched.preemption,
        "bindConcurrency": sched.bind_concurrency,
        "clientQps": sched.client_qps,
        "leaderElection": {"leaseName": sched.name, "leaseNamespace": spec.metadata.namespace},
        "topologyPolicy": [
            r.model_dump(by_alias=True, exclude_none=True) for r in sched.topology_policy
        ],
    }


def build_scheduler(spec: ClusterSpec) -> list[dict[str, Any]]:
    name, ns = spec.scheduler.name, spec.metadata.namespace
    labels = app_labels(name, "scheduler", spec.metadata.name)
    selector = {"app.kubernetes.io/name": name, "app.kubernetes.io/instance": spec.metadata.name}
    cluster_role = f"{spec.metadata.name}-{name}"
    objs: list[dict[str, Any]] = [
        *service_account_with_cluster_role(name, ns, labels, SCHEDULER_RULES, cluster_role),
        {
            "apiVersion": "rbac.authorization.k8s.io/v1",
            "kind": "Role",
            "metadata": {"name": f"{name}-leader-election", "namespace": ns, "labels": labels},
            "rules": LEASE_RULES,
        },
        {
            "apiVersion": "rbac.authorization.k8s.io/v1",
            "kind": "RoleBinding",
            "metadata": {"name": f"{name}-leader-election", "namespace": ns, "labels": labels},
            "roleRef": {
                "apiGroup": "rbac.authorization.k8s.io",
                "kind": "Role",
                "name": f"{name}-leader-election",
            },
            "subjects": [{"kind": "ServiceAccount", "name": name, "namespace": ns}],
        },
        {
            "apiVersion": "v1",
            "kind": "ConfigMap",
            "metadata": {"name": f"{name}-config", "namespace": ns, "labels": labels},
            "data": {"config.yaml": yaml.safe_dump(scheduler_config(spec), sort_keys=False)},
        },
        {
            "apiVersion": "apps/v1",
            "kind": "Deployment",
            "metadata": {"name": name, "namespace": ns, "labels": labels},
            "spec": {
                "replicas": spec.scheduler.replicas,
                "selector": {"matchLabels": selector},
                "template": {
                    "metadata": {"labels": labels},
                    "spec": {
                        "serviceAccountName": name,
                        "priorityClassName": "system-cluster-critical",
                        "containers": [
                            {
                                "name": "scheduler",
                                "image": spec.image.reference,
                                "imagePullPolicy": spec.image.pull_policy,
                                "command": [
                                    "trainmaster-scheduler",
                                    "--config",
                                    "/etc/trainmaster-scheduler/config.yaml",
                                ],
                                "ports": [{"name": "metrics", "containerPort": 10259}],
                                "resources": {
                                    "requests": {"cpu": "500m", "memory": "512Mi"},
                                    "limits": {"memory": "2Gi"},
                                },
                                "securityContext": {
                                    "runAsNonRoot": True,
                                    "runAsUser": 65532,
                                    "allowPrivilegeEscalation": False,
                                    "readOnlyRootFilesystem": True,
                                },
                                "volumeMounts": [
                                    {"name": "config", "mountPath": "/etc/trainmaster-scheduler"}
                                ],
                            }
                        ],
                        "volumes": [{"name": "config", "configMap": {"name": f"{name}-config"}}],
                    },
                },
            },
        },
    ]
    for queue in spec.scheduler.queues:
        objs.append(
            {
                "apiVersion": "scheduling.k8s.io/v1",
                "kind": "PriorityClass",
                "metadata": {
                    "name": priority_class_name(spec, queue.name),
                    "labels": app_labels(queue.name, "queue", spec.metadata.name),
                },
                "value": queue.priority,
                "preemptionPolicy": "PreemptLowerPriority"
                if spec.scheduler.preemption
                else "Never",
                "globalDefault": False,
                "description": f"trainmaster queue {queue.name}"
                + (f" (quota {queue.gpu_quota} GPUs)" if queue.gpu_quota is not None else ""),
            }
        )
    return objs
