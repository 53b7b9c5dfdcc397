"""The trainmaster operator: the cluster spec it builds gangs from, its identity,
least-privilege RBAC and Deployment."""

from __future__ import annotations

from typing import Any

from trainmaster.objects._labels import app_labels
from trainmaster.objects._rbac import service_account_with_cluster_role
from trainmaster.spec import ClusterSpec

SPEC_KEY = "cluster.yaml"

OPERATOR_RULES: list[dict[str, Any]] = [
    {
        "apiGroups": ["trainmaster.io"],
        "resources": ["trainingjobs"],
        "verbs": ["get", "list", "watch", "patch", "update"],
    },
    {
        "apiGroups": ["trainmaster.io"],
        "resources": ["trainingjobs/status"],
        "verbs": ["get", "patch", "update"],
    },
    {
        "apiGroups": ["batch"],
        "resources": ["jobs"],
        "verbs": ["get", "list", "watch", "create", "patch", "update", "delete"],
    },
    {
        "apiGroups": [""],
        "resources": ["services", "configmaps"],
        "verbs": ["get", "list", "watch", "create", "patch", "update", "delete"],
    },
    {
        "apiGroups": ["scheduling.x-k8s.io"],
        "resources": ["podgroups"],
        "verbs": ["get", "list", "watch", "create", "patch", "update", "delete"],
    },
    {"apiGroups": [""], "resources": ["pods"], "verbs": ["get", "list", "watch", "delete"]},
    # Fencing: cordon and taint unhealthy nodes.
    {"apiGroups": [""], "resources": ["nodes"], "verbs": ["get", "list", "watch", "patch"]},
    {
        "apiGroups": ["", "events.k8s.io"],
        "resources": ["events"],
        "verbs": ["create", "patch", "update"],
    },
    {
        "apiGroups": ["apiextensions.k8s.io"],
        "resources": ["customresourcedefinitions"],
        "verbs": ["get", "list", "watch"],
    },
    {
        "apiGroups": ["coordination.k8s.io"],
        "resources": ["leases"],
        "verbs": ["get", "list", "watch", "create", "update", "patch"],
    },
]


def spec_configmap_name(spec: ClusterSpec) -> str:
    return f"{spec.metadata.name}-spec"


def build_spec_configmap(spec: ClusterSpec, spec_text: str) -> dict[str, Any]:
    """The validated cluster spec, for the operator to build gangs from."""
    return {
        "apiVersion": "v1",
        "kind": "ConfigMap",
        "metadata": {
            "name": spec_configmap_name(spec),
            "namespace": spec.metadata.namespace,
            "labels": app_labels("cluster-spec", "operator", spec.metadata.name),
        },
        "data": {SPEC_KEY: spec_text},
    }


def build_operator(spec: ClusterSpec, spec_text: str) -> list[dict[str, Any]]:
    ns, cluster = spec.metadata.namespace, spec.metadata.name
    name = f"{cluster}-operator"
    labels = app_labels("trainmaster-operator", "operator", cluster)
    selector = {
        "app.kubernetes.io/name": "trainmaster-operator",
        "app.kubernetes.io/instance": cluster,
    }
    return [
        build_spec_configmap(spec, spec_text),
        *service_account_with_cluster_role(name, ns, labels, OPERATOR_RULES),
        {
            "apiVersion": "apps/v1",
            "kind": "Deployment",
            "metadata": {"name": name, "namespace": ns, "labels": labels},
            "spec": {
                "replicas": 1,
                "selector": {"matchLabels": selector},
                "strategy": {"type": "Recreate"},
                "template": {
                    "metadata": {"labels": labels},
                    "spec": {
                        "serviceAccountName": name,
                        "containers": [
                            {
                                "name": "operator",
                                "image": spec.image.reference,
                                "imagePullPolicy": spec.image.pull_policy,
                                "command": [
                                    "trainmaster",
                                    "operator",
                                    "run",
                                    "--namespace",
                                    ns,
                                    "--spec-configmap",
                                    spec_configmap_name(spec),
                                ],
                                "resources": {
                                    "requests": {"cpu": "200m", "memory": "256Mi"},
                                    "limits": {"memory": "1Gi"},
                                },
                                "securityContext": {
                                    "runAsNonRoot": True,
                                    "runAsUser": 65532,
                                    "allowPrivilegeEscalation": False,
                                    "readOnlyRootFilesystem": True,
                                },
                            }
                        ],
                    },
                },
            },
        },
    ]
