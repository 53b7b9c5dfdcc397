"""The web view (`trainmaster ui`) in the cluster, when `ui.enabled`: a Deployment in
`<namespace>-system` under its own read-only ServiceAccount, a ClusterIP Service, and the
NetworkPolicy that says which namespaces' pods may open it (none by default: only
`kubectl port-forward` reaches it then).

Its rights are exactly what the UI's store watches (trainmaster.ui's `Scope`): nodes, pods
and PodGroups everywhere (a ClusterRole), and in Roles: TrainingJobs of the cluster's
namespace, Events of the scheduler's namespaces and of `default` (nodes'), LocalQueues of
each team namespace (where the scheduler reads them, to resolve a gang's queue label as
it does), the scheduler's config ConfigMaps in `<namespace>-system` (its queues). get,
list and watch only; no Secret.
"""

from __future__ import annotations

from typing import Any

from trainmaster.api import (
    APP_INSTANCE_LABEL,
    APP_NAME_LABEL,
    GROUP,
    PODGROUP_GROUP,
    TRAININGJOB_PLURAL,
    app_labels,
)
from trainmaster.objects._local_queues import LOCALQUEUE_READ, local_queue_namespaces
from trainmaster.objects._netpol import NAMESPACE_NAME_LABEL
from trainmaster.objects._operator import NODE_EVENT_NAMESPACE
from trainmaster.objects._rbac import identity
from trainmaster.objects._scheduler import served_namespaces
from trainmaster.objects._security import system_namespace, system_placement
from trainmaster.objects._workload import system_container, system_pod, system_workload
from trainmaster.spec import ClusterSpec

READ = ["get", "list", "watch"]

UI_CLUSTER_RULES: list[dict[str, Any]] = [
    # The topology: nodes, and every pod on them whatever its namespace (as the scheduler
    # reads them); gangs are PodGroups, in every namespace the scheduler serves.
    {"apiGroups": [""], "resources": ["nodes", "pods"], "verbs": READ},
    {"apiGroups": [PODGROUP_GROUP], "resources": ["podgroups"], "verbs": READ},
]
"""The UI's cluster-wide rights (a ClusterRole): read only."""

UI_JOB_RULES: list[dict[str, Any]] = [
    {"apiGroups": [GROUP], "resources": [TRAININGJOB_PLURAL], "verbs": READ},
]
"""TrainingJobs, in the cluster's namespace (a Role there)."""

UI_EVENT_RULES: list[dict[str, Any]] = [
    {"apiGroups": [""], "resources": ["events"], "verbs": READ},
]
"""Events of jobs and gangs (each namespace the scheduler serves) and of nodes (`default`,
where the kubelet and the operator report them): a Role in each."""

UI_SYSTEM_RULES: list[dict[str, Any]] = [
    # The scheduler's config (its queues and quotas). A label selector cannot narrow RBAC,
    # so it reads the ConfigMaps of trainmaster's own namespace, which hold no credential.
    {"apiGroups": [""], "resources": ["configmaps"], "verbs": READ},
]
"""The UI's rights in `<namespace>-system` (a Role there)."""


def event_namespaces(spec: ClusterSpec) -> list[str]:
    """Where the UI reads Events: the scheduler's namespaces, then the nodes' (each once)."""
    return list(dict.fromkeys([*served_namespaces(spec), NODE_EVENT_NAMESPACE]))


def ui_rules(spec: ClusterSpec) -> dict[str, list[dict[str, Any]]]:
    """namespace -> the UI's rules there (its Roles)."""
    rules: dict[str, list[dict[str, Any]]] = {spec.metadata.namespace: list(UI_JOB_RULES)}
    for namespace in event_namespaces(spec):
        rules.setdefault(namespace, []).extend(UI_EVENT_RULES)
    for namespace in local_queue_namespaces(spec):  # the scheduler's own rule: there only
        rules.setdefault(namespace, []).extend(LOCALQUEUE_READ)
    rules[system_namespace(spec)] = list(UI_SYSTEM_RULES)
    return rules


UI_PORT = 8080
"""The container's port (named `http`); the Service serves it on port 80."""


def ui_name(spec: ClusterSpec) -> str:
    """The ServiceAccount, Deployment and Service: `<cluster>-ui`."""
    return f"{spec.metadata.name}-ui"


def ui_command(spec: ClusterSpec) -> list[str]:
    """`trainmaster ui --in-cluster`: the pod's ServiceAccount, every address of the pod
    (the Service's traffic arrives on its IP, `kubectl port-forward`'s on loopback), and
    the namespaced kinds read where its Roles let it, nowhere else."""
    events = [arg for ns in event_namespaces(spec) for arg in ("--events-namespace", ns)]
    local = [arg for ns in local_queue_namespaces(spec)
             for arg in ("--localqueue-namespace", ns)]
    return ["trainmaster", "ui", "--in-cluster", "--port", str(UI_PORT),
            "--jobs-namespace", spec.metadata.namespace, *events, *local,
            "--config-namespace", system_namespace(spec)]


def _access_policy(spec: ClusterSpec, name: str, namespace: str, labels: dict[str, str],
                   selector: dict[str, str]) -> dict[str, Any]:
    """The UI's pods accept its port from the pods of `ui.accessNamespaces` only (no rule:
    nobody, beside the namespace's default deny)."""
    peers = [{"namespaceSelector": {"matchLabels": {NAMESPACE_NAME_LABEL: ns}}}
             for ns in spec.ui.access_namespaces]
    ingress = [{"from": peers, "ports": [{"port": UI_PORT}]}] if peers else []
    return {
        "apiVersion": "networking.k8s.io/v1",
        "kind": "NetworkPolicy",
        "metadata": {"name": f"{name}-access", "namespace": namespace, "labels": labels},
        "spec": {"podSelector": {"matchLabels": selector}, "policyTypes": ["Ingress"],
                 "ingress": ingress},
    }


def _deployment(spec: ClusterSpec, name: str, namespace: str, labels: dict[str, str],
                selector: dict[str, str]) -> dict[str, Any]:
    probe = {"httpGet": {"path": "/healthz", "port": "http"}, "periodSeconds": 10}
    container = system_container(
        spec, "ui", ui_command(spec),
        ports=[{"name": "http", "containerPort": UI_PORT, "protocol": "TCP"}],
        probes={"readinessProbe": probe, "livenessProbe": {**probe, "failureThreshold": 6}},
        cpu="100m", memory="256Mi", memory_limit="2Gi",
    )
    pod = system_pod(name, container, placement=system_placement(spec))
    return system_workload("Deployment", name, namespace, labels, selector, pod,
                           replicas=spec.ui.replicas)


def build_ui(spec: ClusterSpec) -> list[dict[str, Any]]:
    """Nothing unless `ui.enabled`; then the identity, Deployment, Service and policy."""
    if not spec.ui.enabled:
        return []
    name, namespace = ui_name(spec), system_namespace(spec)
    labels = app_labels("trainmaster-ui", "ui", spec.metadata.name)
    selector = {APP_NAME_LABEL: "trainmaster-ui",
                APP_INSTANCE_LABEL: spec.metadata.name}
    return [
        *identity(name, namespace, labels, cluster_rules=UI_CLUSTER_RULES,
                  namespaced_rules=ui_rules(spec)),
        _deployment(spec, name, namespace, labels, selector),
        {
            "apiVersion": "v1",
            "kind": "Service",
            "metadata": {"name": name, "namespace": namespace, "labels": labels},
            "spec": {
                "type": "ClusterIP",
                "selector": selector,
                "ports": [{"name": "http", "port": 80, "targetPort": "http"}],
            },
        },
        _access_policy(spec, name, namespace, labels, selector),
    ]
