"""The trainmaster operator: the cluster spec it builds gangs from, its identity,
least-privilege RBAC and Deployment (in `<namespace>-system`, managing `<namespace>`)."""

from __future__ import annotations

from typing import Any

from trainmaster.api import APP_INSTANCE_LABEL, APP_NAME_LABEL, GROUP, app_labels
from trainmaster.objects._rbac import identity
from trainmaster.objects._scrape import METRICS_ARGS, POD_IP_ENV, metrics_port, scrape_objects
from trainmaster.objects._security import system_namespace, system_placement
from trainmaster.objects._workload import system_container, system_pod, system_workload
from trainmaster.spec import ClusterSpec

SPEC_KEY = "cluster.yaml"

_ALL = ["get", "list", "watch", "create", "patch", "update", "delete"]

OPERATOR_RULES: list[dict[str, Any]] = [
    {
        "apiGroups": [GROUP],
        "resources": ["trainingjobs"],
        "verbs": ["get", "list", "watch", "patch", "update"],
    },
    {
        "apiGroups": [GROUP],
        "resources": ["trainingjobs/status"],
        "verbs": ["get", "patch", "update"],
    },
    {"apiGroups": ["batch"], "resources": ["jobs"], "verbs": _ALL},
    {"apiGroups": [""], "resources": ["services", "configmaps"], "verbs": _ALL},
    {"apiGroups": ["scheduling.x-k8s.io"], "resources": ["podgroups"], "verbs": _ALL},
    {"apiGroups": [""], "resources": ["pods"], "verbs": ["get", "list", "watch", "delete"]},
    # Each job's identity and NetworkPolicy, created with its gang (build_gang). Creating
    # the Role and its binding needs no `bind`/`escalate`: the operator holds every right
    # that Role grants (get/patch trainingjobs/status above).
    {
        "apiGroups": [""],
        "resources": ["serviceaccounts"],
        "verbs": ["get", "create", "patch", "update"],
    },
    {
        "apiGroups": ["rbac.authorization.k8s.io"],
        "resources": ["roles", "rolebindings"],
        "verbs": ["get", "create", "patch", "update"],
    },
    {
        "apiGroups": ["networking.k8s.io"],
        "resources": ["networkpolicies"],
        "verbs": ["get", "create", "patch", "update"],
    },
    {
        "apiGroups": ["", "events.k8s.io"],
        "resources": ["events"],
        "verbs": ["create", "patch", "update"],
    },
]
"""The operator's rights in the namespace it manages (a Role there)."""

OPERATOR_NODE_EVENT_RULES: list[dict[str, Any]] = [
    {
        "apiGroups": ["", "events.k8s.io"],
        "resources": ["events"],
        "verbs": ["create", "patch", "update"],
    },
]
"""Events about nodes go to the `default` namespace, as the kubelet's do (a Role there)."""

OPERATOR_CLUSTER_RULES: list[dict[str, Any]] = [
    # Fencing cordons and taints sick nodes; finished warm-ups become node labels.
    {"apiGroups": [""], "resources": ["nodes"], "verbs": ["get", "list", "watch", "patch"]},
    {
        "apiGroups": ["apiextensions.k8s.io"],
        "resources": ["customresourcedefinitions"],
        "verbs": ["get", "list", "watch"],
    },
]
"""The operator's cluster-wide rights (a ClusterRole): cluster-scoped resources only."""

NODE_EVENT_NAMESPACE = "default"

OPERATOR_METRICS_PORT = 10260
"""The operator's /metrics port (trainmaster.operator._metrics.METRICS_PORT)."""


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
    system = system_namespace(spec)
    name = f"{cluster}-operator"
    labels = app_labels("trainmaster-operator", "operator", cluster)
    selector = {
        APP_NAME_LABEL: "trainmaster-operator",
        APP_INSTANCE_LABEL: cluster,
    }
    command = ["trainmaster", "operator", "run", "--namespace", ns,
               "--spec-configmap", spec_configmap_name(spec),
               *METRICS_ARGS, "--metrics-port", str(OPERATOR_METRICS_PORT)]
    container = system_container(spec, "operator", command, env=[POD_IP_ENV],
                                 ports=[metrics_port(OPERATOR_METRICS_PORT)],
                                 cpu="200m", memory="256Mi", memory_limit="1Gi")
    pod = system_pod(name, container, placement=system_placement(spec))
    return [
        build_spec_configmap(spec, spec_text),
        *identity(
            name,
            system,
            labels,
            cluster_rules=OPERATOR_CLUSTER_RULES,
            namespaced_rules={ns: OPERATOR_RULES, NODE_EVENT_NAMESPACE: OPERATOR_NODE_EVENT_RULES},
        ),
        *scrape_objects(spec, name, system, labels, selector, OPERATOR_METRICS_PORT),
        system_workload("Deployment", name, system, labels, selector, pod, replicas=1,
                        strategy={"type": "Recreate"}),
    ]
