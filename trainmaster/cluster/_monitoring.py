"""The monitoring stack on the real nodes: `cluster up --real-nodes N --monitoring`.

What a platform team gets from kube-prometheus-stack, built here from the pinned Go modules
(toolchain families `prometheus-operator`, `prometheus`, `alertmanager`):

1. the operator's own CRDs (monitoring.coreos.com, from the operator's module at the pinned
   version) in place of trainmaster's stand-ins;
2. the Prometheus operator as a Deployment in the monitoring namespace, with a ClusterRole
   that only reads (the monitors, rules and namespaces it selects from) and a Role that
   writes only in that namespace (its StatefulSets, Secrets, Services);
3. one `Prometheus` CR that selects every ServiceMonitor, PodMonitor and PrometheusRule
   labelled `app.kubernetes.io/part-of: trainmaster` in any namespace, and sends alerts to
4. one `Alertmanager` CR.

No scrape configuration is written here: the operator generates it from trainmaster's
rendered objects. Every pod runs on the real nodes (their label and taint) from images of
one static binary each (trainmaster.image.write_static_archive), loaded like the trainmaster
image. `cluster down` stops it with the nodes.
"""

from __future__ import annotations

import hashlib
from pathlib import Path
from typing import Any

import yaml

from trainmaster.api import (
    APP_INSTANCE_LABEL,
    APP_MANAGED_BY_LABEL,
    APP_NAME_LABEL,
    APP_PART_OF_LABEL,
    REAL_NODE_LABEL,
    STUB_ANNOTATION,
    app_labels,
)
from trainmaster.cluster._network_crds import wait_established
from trainmaster.cluster._processes import ClusterError
from trainmaster.image import StaticImage, write_static_archive
from trainmaster.kubeclient import ApiError, SyncKube, crd_path
from trainmaster.toolchain import (
    ALERTMANAGER_VERSION,
    PROMETHEUS_OPERATOR_CRDS,
    PROMETHEUS_OPERATOR_VERSION,
    family_dir,
    tool_path,
)

NAME = "trainmaster"
"""The Prometheus and Alertmanager CRs' name (their pods: prometheus-trainmaster-0, ...)."""
OPERATOR = "prometheus-operator"
PROMETHEUS_SA = "prometheus"
PROMETHEUS_VERSION = "v3.16.0"  # module v0.316.0
PROMETHEUS_PORT = 9090
ALERTMANAGER_PORT = 9093
OPERATOR_PORT = 8080
EVALUATION_INTERVAL = "15s"

IMAGES = {
    "operator": f"trainmaster.local/prometheus-operator:{PROMETHEUS_OPERATOR_VERSION}",
    "prometheus-config-reloader":
        f"trainmaster.local/prometheus-config-reloader:{PROMETHEUS_OPERATOR_VERSION}",
    "prometheus": f"trainmaster.local/prometheus:{PROMETHEUS_VERSION}",
    "alertmanager": f"trainmaster.local/alertmanager:{ALERTMANAGER_VERSION}",
}
_WORKDIRS = {"prometheus": "/prometheus", "alertmanager": "/alertmanager"}

ON_REAL_NODES: dict[str, Any] = {
    "nodeSelector": {REAL_NODE_LABEL: "true"},
    "tolerations": [{"key": REAL_NODE_LABEL, "operator": "Exists", "effect": "NoSchedule"}],
}
# Non-root, as kube-prometheus-stack runs them (nobody; fsGroup makes the emptyDir writable).
_POD_SECURITY: dict[str, Any] = {
    "runAsNonRoot": True, "runAsUser": 65534, "runAsGroup": 65534, "fsGroup": 65534,
    "seccompProfile": {"type": "RuntimeDefault"},
}
_CONTAINER_SECURITY: dict[str, Any] = {
    "allowPrivilegeEscalation": False, "readOnlyRootFilesystem": True,
    "capabilities": {"drop": ["ALL"]},
}
_MONITORING_GROUP = "monitoring.coreos.com"
_READ = ["get", "list", "watch"]


class _CrdLoader(yaml.CSafeLoader):
    """YAML 1.1 reads a bare `=` as the `value` tag, which no safe loader constructs; the
    operator's CRDs list `=` among a relabelling's `action` values. Here it is a string."""

    # PyYAML declares this on its base class; RUF012 would have a ClassVar that mypy refuses.
    yaml_implicit_resolvers = {  # noqa: RUF012
        first: [(tag, regexp) for tag, regexp in resolvers
                if tag != "tag:yaml.org,2002:value"]
        for first, resolvers in yaml.CSafeLoader.yaml_implicit_resolvers.items()
    }


def crd_documents() -> list[dict[str, Any]]:
    """The operator's CRDs at the pinned version, as its module ships them."""
    docs = []
    for plural in PROMETHEUS_OPERATOR_CRDS:
        path = tool_path(f"crds/monitoring.coreos.com_{plural}.yaml")
        found = [d for d in yaml.load_all(path.read_text(), Loader=_CrdLoader) if d]
        if len(found) != 1 or found[0].get("kind") != "CustomResourceDefinition":
            raise ClusterError(f"{path} does not hold exactly one CRD")
        # `trainmaster apply` and the Pulumi program keep a CRD that is not their stand-in,
        # and name its owner from this label ("kept ...: it belongs to prometheus-operator").
        found[0]["metadata"].setdefault("labels", {})[APP_MANAGED_BY_LABEL] = OPERATOR
        docs.append(found[0])
    return docs


def _rule(groups: list[str], resources: list[str], verbs: list[str]) -> dict[str, Any]:
    return {"apiGroups": groups, "resources": resources, "verbs": verbs}


def operator_cluster_rules() -> list[dict[str, Any]]:
    """Cluster-wide, the operator only reads: what the Prometheus CR selects in any
    namespace, and the namespaces its selectors match."""
    return [
        _rule([_MONITORING_GROUP], ["servicemonitors", "podmonitors", "probes",
                                    "prometheusrules", "scrapeconfigs", "alertmanagerconfigs",
                                    "prometheuses", "alertmanagers"], _READ),
        _rule([""], ["namespaces"], _READ),
    ]


def operator_namespace_rules() -> list[dict[str, Any]]:
    """In the monitoring namespace only, what the operator makes for Prometheus and
    Alertmanager: StatefulSets, their generated config Secrets and ConfigMaps, the governing
    Services and their endpoints, status updates and Events."""
    return [
        _rule([_MONITORING_GROUP], ["prometheuses/status", "alertmanagers/status",
                                    "prometheuses/finalizers", "alertmanagers/finalizers"],
              ["get", "update", "patch"]),
        _rule(["apps"], ["statefulsets"], [*_READ, "create", "update", "patch", "delete"]),
        _rule([""], ["configmaps", "secrets"], [*_READ, "create", "update", "patch", "delete"]),
        _rule([""], ["services", "endpoints"], [*_READ, "create", "update", "delete"]),
        _rule(["discovery.k8s.io"], ["endpointslices"],
              [*_READ, "create", "update", "delete"]),
        _rule([""], ["pods"], ["list", "delete"]),
        _rule([""], ["events"], ["create", "patch"]),
        _rule(["events.k8s.io"], ["events"], ["create", "patch"]),
    ]


def prometheus_cluster_rules() -> list[dict[str, Any]]:
    """Prometheus discovers its targets (kubernetes_sd_configs: pods, endpoints) in every
    namespace a monitor selects, and reads nothing else."""
    return [
        _rule([""], ["services", "endpoints", "pods"], _READ),
        _rule(["discovery.k8s.io"], ["endpointslices"], _READ),
    ]


def _binding(kind: str, name: str, ns: str, sa: str, labels: dict[str, str]
             ) -> dict[str, Any]:
    meta: dict[str, Any] = {"name": name, "labels": labels}
    if kind == "RoleBinding":
        meta["namespace"] = ns
    return {
        "apiVersion": "rbac.authorization.k8s.io/v1", "kind": kind, "metadata": meta,
        "roleRef": {"apiGroup": "rbac.authorization.k8s.io",
                    "kind": "Role" if kind == "RoleBinding" else "ClusterRole", "name": name},
        "subjects": [{"kind": "ServiceAccount", "name": sa, "namespace": ns}],
    }


def stack_objects(namespace: str, cluster: str, scrape_interval: str) -> list[dict[str, Any]]:
    """Namespace, identities, the operator, the Prometheus and the Alertmanager CR."""
    labels = app_labels(OPERATOR, "monitoring", cluster)
    selector = {APP_NAME_LABEL: OPERATOR, APP_INSTANCE_LABEL: cluster}
    prom_labels = app_labels("prometheus", "monitoring", cluster)
    am_labels = app_labels("alertmanager", "monitoring", cluster)
    trainmaster_objects = {"matchLabels": {APP_PART_OF_LABEL: "trainmaster"}}
    every_namespace: dict[str, Any] = {}
    operator_role = f"{cluster}-{OPERATOR}"
    prometheus_role = f"{cluster}-{PROMETHEUS_SA}"
    ns_meta = {"name": namespace, "labels": {
        "kubernetes.io/metadata.name": namespace,
        # Every pod here runs as non-root with every capability dropped; `restricted` is
        # warned and audited, `baseline` enforced, so that a field the operator's pod
        # templates leave out (a seccomp profile on its init container, say) warns, not
        # stops the StatefulSet.
        "pod-security.kubernetes.io/enforce": "baseline",
        "pod-security.kubernetes.io/warn": "restricted",
        "pod-security.kubernetes.io/audit": "restricted"}}

    def sa(name: str, sa_labels: dict[str, str]) -> dict[str, Any]:
        return {"apiVersion": "v1", "kind": "ServiceAccount",
                "metadata": {"name": name, "namespace": namespace, "labels": sa_labels}}

    return [
        {"apiVersion": "v1", "kind": "Namespace", "metadata": ns_meta},
        sa(OPERATOR, labels),
        {"apiVersion": "rbac.authorization.k8s.io/v1", "kind": "ClusterRole",
         "metadata": {"name": operator_role, "labels": labels},
         "rules": operator_cluster_rules()},
        _binding("ClusterRoleBinding", operator_role, namespace, OPERATOR, labels),
        {"apiVersion": "rbac.authorization.k8s.io/v1", "kind": "Role",
         "metadata": {"name": operator_role, "namespace": namespace, "labels": labels},
         "rules": operator_namespace_rules()},
        _binding("RoleBinding", operator_role, namespace, OPERATOR, labels),
        sa(PROMETHEUS_SA, prom_labels),
        {"apiVersion": "rbac.authorization.k8s.io/v1", "kind": "ClusterRole",
         "metadata": {"name": prometheus_role, "labels": prom_labels},
         "rules": prometheus_cluster_rules()},
        _binding("ClusterRoleBinding", prometheus_role, namespace, PROMETHEUS_SA, prom_labels),
        {
            "apiVersion": "apps/v1", "kind": "Deployment",
            "metadata": {"name": OPERATOR, "namespace": namespace, "labels": labels},
            "spec": {
                "replicas": 1,
                "selector": {"matchLabels": selector},
                "template": {
                    "metadata": {"labels": labels},
                    "spec": {
                        "serviceAccountName": OPERATOR,
                        "securityContext": _POD_SECURITY,
                        **ON_REAL_NODES,
                        "containers": [{
                            "name": "operator",
                            "image": IMAGES["operator"],
                            "imagePullPolicy": "IfNotPresent",
                            "args": [
                                f"--prometheus-config-reloader="
                                f"{IMAGES['prometheus-config-reloader']}",
                                # Its StatefulSets, Secrets and Services only here (the Role).
                                f"--prometheus-instance-namespaces={namespace}",
                                f"--alertmanager-instance-namespaces={namespace}",
                                f"--thanos-ruler-instance-namespaces={namespace}",
                                # AlertmanagerConfigs (and the Secrets and ConfigMaps the
                                # Alertmanager controller watches for them) only here too:
                                # unset, it lists them cluster-wide, which the Role refuses.
                                f"--alertmanager-config-namespaces={namespace}",
                                f"--web.listen-address=:{OPERATOR_PORT}",
                            ],
                            "ports": [{"name": "http", "containerPort": OPERATOR_PORT}],
                            "securityContext": _CONTAINER_SECURITY,
                            "resources": {"requests": {"cpu": "50m", "memory": "64Mi"}},
                        }],
                    },
                },
            },
        },
        {
            "apiVersion": f"{_MONITORING_GROUP}/v1", "kind": "Prometheus",
            "metadata": {"name": NAME, "namespace": namespace, "labels": prom_labels},
            "spec": {
                "image": IMAGES["prometheus"],
                "version": PROMETHEUS_VERSION,
                "replicas": 1,
                "serviceAccountName": PROMETHEUS_SA,
                "scrapeInterval": scrape_interval,
                "evaluationInterval": EVALUATION_INTERVAL,
                # trainmaster's rendered monitors and rules, wherever the spec put them.
                "serviceMonitorSelector": trainmaster_objects,
                "serviceMonitorNamespaceSelector": every_namespace,
                "podMonitorSelector": trainmaster_objects,
                "podMonitorNamespaceSelector": every_namespace,
                "ruleSelector": trainmaster_objects,
                "ruleNamespaceSelector": every_namespace,
                "alerting": {"alertmanagers": [{
                    "namespace": namespace, "name": "alertmanager-operated",
                    "port": "web", "apiVersion": "v2"}]},
                "securityContext": _POD_SECURITY,
                "resources": {"requests": {"cpu": "100m", "memory": "256Mi"}},
                **ON_REAL_NODES,
            },
        },
        {
            "apiVersion": f"{_MONITORING_GROUP}/v1", "kind": "Alertmanager",
            "metadata": {"name": NAME, "namespace": namespace, "labels": am_labels},
            "spec": {
                "image": IMAGES["alertmanager"],
                "version": ALERTMANAGER_VERSION,
                "replicas": 1,
                # It never calls the API: no token (its `default` account is bound to nothing).
                "automountServiceAccountToken": False,
                "securityContext": _POD_SECURITY,
                "resources": {"requests": {"cpu": "50m", "memory": "64Mi"}},
                **ON_REAL_NODES,
            },
        },
    ]


def write_images(archive: Path) -> list[str]:
    """The four images (operator, config reloader, Prometheus, Alertmanager) in one tar."""
    images = [
        StaticImage(IMAGES[binary], tool_path(binary), _WORKDIRS.get(binary, "/"))
        for binary in IMAGES
    ]
    return write_static_archive(images, archive)


def images_archive(state_dir: Path) -> Path:
    """Where the archive goes; rewritten when a tool family was rebuilt (its folder name
    carries the build's digest)."""
    key = "-".join(family_dir(f).name for f in ("prometheus-operator", "prometheus",
                                                  "alertmanager"))
    digest = hashlib.sha256(key.encode()).hexdigest()[:12]
    return state_dir / "images" / f"monitoring-{digest}.tar"



def install(kubeconfig: Path, namespace: str, cluster: str, scrape_interval: str,
            timeout: float = 60) -> list[str]:
    """Apply the real CRDs (over any stand-in), then the stack; returns what was applied."""
    applied: list[str] = []
    with SyncKube.connect(kubeconfig) as kube:
        crds = crd_documents()
        for doc in crds:
            name = doc["metadata"]["name"]
            try:
                # force: the stand-in's fields (its schema, the stub annotation) give way.
                kube.apply(_without_stub(kube, doc))
            except ApiError as exc:
                raise ClusterError(f"applying CRD {name} failed: {exc}") from None
            applied.append(f"CustomResourceDefinition/{name}")
        wait_established(kube, [d["metadata"]["name"] for d in crds], timeout)
        for obj in stack_objects(namespace, cluster, scrape_interval):
            try:
                kube.apply(obj)
            except ApiError as exc:
                raise ClusterError(
                    f"applying {obj['kind']} {obj['metadata']['name']} failed: {exc}") from None
            applied.append(f"{obj['kind']}/{obj['metadata']['name']}")
    return applied


def _without_stub(kube: SyncKube, doc: dict[str, Any]) -> dict[str, Any]:
    """The CRD to apply. A stand-in stored earlier carries trainmaster's stub annotation,
    which the apply must drop (an annotation nobody declares any more stays otherwise), so
    that `apply` then sees the real CRD and keeps it."""
    try:
        existing = kube.get(crd_path(doc["metadata"]["name"]))
    except ApiError:
        return doc
    annotations = (existing.get("metadata") or {}).get("annotations") or {}
    if STUB_ANNOTATION in annotations:
        # A merge patch with null removes the key, whoever set it.
        kube.patch(crd_path(doc["metadata"]["name"]),
                   {"metadata": {"annotations": {STUB_ANNOTATION: None}}})
    return doc
