"""The NIC health agent: a DaemonSet on every GPU node running `trainmaster node-agent nic`,
which reads the host's /sys (read-only) and sets the node condition NICHealthy."""

from __future__ import annotations

from typing import Any

from trainmaster.api import app_labels
from trainmaster.objects._networks import rail_devices
from trainmaster.objects._rbac import identity
from trainmaster.objects._security import restricted_container, restricted_pod
from trainmaster.spec import ClusterSpec

NIC_AGENT_RULES: list[dict[str, Any]] = [
    # Reads its node, writes its node's status. RBAC cannot narrow this to one node (only
    # the kubelet's NodeRestriction can); the agent only ever names its own spec.nodeName.
    {"apiGroups": [""], "resources": ["nodes"], "verbs": ["get"]},
    {"apiGroups": [""], "resources": ["nodes/status"], "verbs": ["patch"]},
]


def nic_agent_name(spec: ClusterSpec) -> str:
    return f"{spec.metadata.name}-nic-agent"


def build_nic_agent(spec: ClusterSpec) -> list[dict[str, Any]]:
    if not spec.monitoring.nic_agent.enabled:
        return []
    ns, cluster, name = spec.metadata.namespace, spec.metadata.name, nic_agent_name(spec)
    labels = app_labels("nic-agent", "monitoring", cluster)
    sysfs = spec.monitoring.nic_agent.sysfs_path  # the host's /sys, or a tree laid out as it
    selector = {"app.kubernetes.io/name": "nic-agent", "app.kubernetes.io/instance": cluster}
    command = [
        "trainmaster", "node-agent", "nic",
        "--sysfs", "/host/sys",
        "--devices", ",".join(rail_devices(spec)),
        "--interval", str(spec.monitoring.nic_agent.interval_seconds),
    ]  # fmt: skip
    daemonset = {
        "apiVersion": "apps/v1",
        "kind": "DaemonSet",
        "metadata": {"name": name, "namespace": ns, "labels": labels},
        "spec": {
            "selector": {"matchLabels": selector},
            "template": {
                "metadata": {"labels": labels},
                "spec": {
                    "serviceAccountName": name,
                    "securityContext": restricted_pod(),
                    "priorityClassName": "system-node-critical",
                    "nodeSelector": {"nvidia.com/gpu.present": "true"},
                    # Also on fenced and NotReady nodes: it reports their recovery.
                    "tolerations": [{"operator": "Exists"}],
                    "containers": [
                        {
                            "name": "nic-agent",
                            "image": spec.image.reference,
                            "imagePullPolicy": spec.image.pull_policy,
                            "command": command,
                            "env": [{
                                "name": "NODE_NAME",
                                "valueFrom": {"fieldRef": {"fieldPath": "spec.nodeName"}},
                            }],
                            "resources": {
                                "requests": {"cpu": "10m", "memory": "64Mi"},
                                "limits": {"memory": "256Mi"},
                            },
                            # Reading sysfs needs no privilege, only the mount.
                            "securityContext": restricted_container(),
                            "volumeMounts": [
                                {"name": "sys", "mountPath": "/host/sys", "readOnly": True}
                            ],
                        }
                    ],
                    "volumes": [{"name": "sys", "hostPath": {"path": sysfs, "type": "Directory"}}],
                },
            },
        },
    }
    return [
        *identity(name, ns, labels, cluster_rules=NIC_AGENT_RULES),
        daemonset,
    ]
