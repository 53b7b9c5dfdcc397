"""The NIC health agent: a DaemonSet on every GPU node running `trainmaster node-agent nic`,
which reads the host's /sys (read-only) and sets the node condition NICHealthy."""

from __future__ import annotations

from typing import Any

from trainmaster.api import APP_INSTANCE_LABEL, APP_NAME_LABEL, app_labels
from trainmaster.objects._networks import rail_devices
from trainmaster.objects._rbac import identity
from trainmaster.objects._scrape import METRICS_ARGS, POD_IP_ENV, metrics_port, scrape_objects
from trainmaster.objects._workload import system_container, system_pod, system_workload
from trainmaster.spec import ClusterSpec

NIC_AGENT_RULES: list[dict[str, Any]] = [
    # Reads its node, writes its node's status. RBAC cannot narrow this to one node; the
    # ValidatingAdmissionPolicy below does (own_node_policy), as NodeRestriction does for
    # kubelets.
    {"apiGroups": [""], "resources": ["nodes"], "verbs": ["get"]},
    {"apiGroups": [""], "resources": ["nodes/status"], "verbs": ["patch"]},
]

ADMISSION_API = "admissionregistration.k8s.io/v1"
# The API server puts the node of the pod a bound ServiceAccount token was issued for in
# the request's user info (Kubernetes 1.30+; the kubelet's projected token is bound).
NODE_NAME_CLAIM = "authentication.kubernetes.io/node-name"


NIC_AGENT_METRICS_PORT = 10261
"""The NIC agent's /metrics port in its pod (the scheduler's is 10259, the operator's 10260)."""


def nic_agent_name(spec: ClusterSpec) -> str:
    return f"{spec.metadata.name}-nic-agent"


def build_nic_agent(spec: ClusterSpec) -> list[dict[str, Any]]:
    if not spec.monitoring.nic_agent.enabled:
        return []
    ns, cluster, name = spec.metadata.namespace, spec.metadata.name, nic_agent_name(spec)
    labels = app_labels("nic-agent", "monitoring", cluster)
    sysfs = spec.monitoring.nic_agent.sysfs_path  # the host's /sys, or a tree laid out as it
    selector = {APP_NAME_LABEL: "nic-agent", APP_INSTANCE_LABEL: cluster}
    command = [
        "trainmaster", "node-agent", "nic",
        "--sysfs", "/host/sys",
        "--devices", ",".join(rail_devices(spec)),
        "--interval", str(spec.monitoring.nic_agent.interval_seconds),
        "--heartbeat", str(spec.monitoring.nic_agent.heartbeat_seconds),
        *METRICS_ARGS, "--metrics-port", str(NIC_AGENT_METRICS_PORT),
    ]  # fmt: skip
    container = system_container(
        spec, "nic-agent", command,
        env=[{"name": "NODE_NAME", "valueFrom": {"fieldRef": {"fieldPath": "spec.nodeName"}}},
             POD_IP_ENV],
        ports=[metrics_port(NIC_AGENT_METRICS_PORT)],
        cpu="10m", memory="64Mi", memory_limit="256Mi",
        # Reading sysfs needs no privilege, only the mount.
        volume_mounts=[{"name": "sys", "mountPath": "/host/sys", "readOnly": True}],
    )
    pod = system_pod(
        name, container, priority_class="system-node-critical",
        placement={
            "nodeSelector": dict(spec.monitoring.nic_agent.node_selector),
            # Also on fenced and NotReady nodes: it reports their recovery.
            "tolerations": [{"operator": "Exists"}],
        },
        volumes=[{"name": "sys", "hostPath": {"path": sysfs, "type": "Directory"}}],
    )
    daemonset = system_workload("DaemonSet", name, ns, labels, selector, pod)
    return [
        *identity(name, ns, labels, cluster_rules=NIC_AGENT_RULES),
        *own_node_policy(spec, labels),
        daemonset,
        # What it saw, on its pod IP: a Service, a ServiceMonitor, and a NetworkPolicy that
        # admits the Prometheus namespace.
        *scrape_objects(spec, name, ns, labels, selector, NIC_AGENT_METRICS_PORT),
    ]


def own_node_policy(spec: ClusterSpec, labels: dict[str, str]) -> list[dict[str, Any]]:
    """A ValidatingAdmissionPolicy and its binding: the NIC agent's ServiceAccount may
    write the status of the node its token was issued on, and no other.

    The agent's pods use the default projected token, which is bound to the pod and so to
    its node: the API server adds that node's name to the request as the extra
    `authentication.kubernetes.io/node-name`. A request without it (a token not bound to a
    pod on a node) is refused too.
    """
    agent = nic_agent_name(spec)
    name = f"{agent}-own-node"
    user = f"system:serviceaccount:{spec.metadata.namespace}:{agent}"
    # `extra` is absent altogether from a token that carries none: has() before `in`.
    has_node = (f'has(request.userInfo.extra) && "{NODE_NAME_CLAIM}" in '
                "request.userInfo.extra")
    node = f'request.userInfo.extra["{NODE_NAME_CLAIM}"]'
    policy = {
        "apiVersion": ADMISSION_API,
        "kind": "ValidatingAdmissionPolicy",
        "metadata": {"name": name, "labels": dict(labels)},
        "spec": {
            "failurePolicy": "Fail",
            "matchConstraints": {"resourceRules": [{
                "apiGroups": [""], "apiVersions": ["*"],
                "operations": ["CREATE", "UPDATE", "DELETE"],
                "resources": ["nodes", "nodes/status"],
            }]},
            "matchConditions": [{"name": "nic-agent",
                                 "expression": f'request.userInfo.username == "{user}"'}],
            "validations": [{
                "expression": f"{has_node} && size({node}) == 1 && {node}[0] == request.name",
                "messageExpression": (
                    f'"{agent} may write only the status of the node its token is bound to ("'
                    f' + ({has_node} ? {node}[0] : "none") + "), not " + request.name'),
                "reason": "Forbidden",
            }],
        },
    }
    binding = {
        "apiVersion": ADMISSION_API,
        "kind": "ValidatingAdmissionPolicyBinding",
        "metadata": {"name": name, "labels": dict(labels)},
        "spec": {"policyName": name, "validationActions": ["Deny"]},
    }
    return [policy, binding]
