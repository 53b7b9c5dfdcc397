"""Multus on the real nodes: the thin plugin, its identity and its configuration.

Each real node's containerd runs one CNI configuration, Multus's (``00-multus.conf``). For
every pod Multus runs the pod network (the node's bridge conflist, its one delegate) as eth0,
then reads the pod's ``k8s.v1.cni.cncf.io/networks`` annotation, fetches each named
NetworkAttachmentDefinition from the API server and runs the CNI configuration the NAD holds
(macvlan plus whereabouts on the node's rail or storage interface, _attachments), as net1..
or the interface the annotation names; it then writes ``k8s.v1.cni.cncf.io/network-status``
on the pod. A pod whose annotation asks for nothing gets the pod network only.

Why the thin plugin: several real nodes share this host. The thick plugin's shim talks to a
per-node daemon over a socket at a fixed host path (``/run/multus/multus.sock``), which the
nodes would have to share; the thin plugin is an ordinary CNI binary that each node's
containerd runs with that node's own configuration, so nothing is shared between nodes.

Multus talks to the API server as the ``multus`` ServiceAccount of kube-system, with a
ClusterRole of its own that grants only what the thin plugin does (docs/security.md):
get pods (to read the annotation), update pods/status (network-status, written with
UpdateStatus), get network-attachment-definitions, and create/patch events.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

from trainmaster.cluster import _identity

NAMESPACE = "kube-system"
SERVICE_ACCOUNT = "multus"
CLUSTER_ROLE = "trainmaster-multus"
CONF_FILE = "00-multus.conf"
"""The node's only CNI configuration: containerd runs the first file of its folder."""

RULES: list[dict[str, Any]] = [
    {"apiGroups": [""], "resources": ["pods"], "verbs": ["get"]},
    {"apiGroups": [""], "resources": ["pods/status"], "verbs": ["update"]},
    {"apiGroups": ["k8s.cni.cncf.io"], "resources": ["network-attachment-definitions"],
     "verbs": ["get"]},
    # Multus records an Event on the pod when an attachment fails.
    {"apiGroups": ["", "events.k8s.io"], "resources": ["events"],
     "verbs": ["create", "patch"]},
]


def identity_documents() -> list[dict[str, Any]]:
    return _identity.cluster_identity("multus", namespace=NAMESPACE, account=SERVICE_ACCOUNT,
                                      role=CLUSTER_ROLE, rules=RULES)


def install(kubeconfig: Path, out_dir: Path, timeout: float = 60) -> Path:
    """Apply Multus's identity; return the path of its own kubeconfig."""
    return _identity.install(kubeconfig, identity_documents(), namespace=NAMESPACE,
                             account=SERVICE_ACCOUNT, out=out_dir / "multus.kubeconfig",
                             timeout=timeout)


def node_config(*, kubeconfig: Path, bin_dir: Path, node_dir: Path,
                pod_network: dict[str, Any]) -> dict[str, Any]:
    """The thin plugin's configuration on one node: the pod network as its one delegate
    (eth0 of every pod), its state and log in the node's folder."""
    return {
        "cniVersion": pod_network["cniVersion"],
        "name": "multus-cni-network",
        "type": "multus",
        "kubeconfig": str(kubeconfig),
        "binDir": str(bin_dir),
        "cniDir": str(node_dir / "multus" / "cache"),
        "confDir": str(node_dir / "multus" / "net.d"),
        "logFile": str(node_dir / "multus" / "multus.log"),
        "logLevel": "verbose",
        "delegates": [pod_network],
    }
