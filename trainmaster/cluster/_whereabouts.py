"""whereabouts on the real nodes: its identity in the cluster and its configuration file.

whereabouts is a CNI IPAM plugin, run by the CNI plugin that attaches a pod (macvlan here) on
the node, as root, once per attachment. It keeps its allocations in the cluster (IPPools and
OverlappingRangeIPReservations in `kube-system`, a Lease there as its lock), so pods on
different nodes never get the same address of a rail's subnet. It talks to the API server as
the `whereabouts` ServiceAccount with the RBAC whereabouts publishes (its
doc/crds/daemonset-install.yaml, from the pinned module), through a kubeconfig named in its
flat configuration file, as its DaemonSet would set it up on a real cluster.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import yaml

from trainmaster.cluster import _identity
from trainmaster.cluster._processes import ClusterError
from trainmaster.toolchain import tool_path

NAMESPACE = "kube-system"
SERVICE_ACCOUNT = "whereabouts"
_IDENTITY_KINDS = ("ServiceAccount", "ClusterRole", "ClusterRoleBinding")


def identity_documents() -> list[dict[str, Any]]:
    """whereabouts' ServiceAccount, ClusterRole and ClusterRoleBinding as published (its
    DaemonSet and ConfigMap only install the binary and a config file on each node)."""
    text = tool_path("whereabouts/daemonset-install.yaml").read_text()
    docs = [d for d in yaml.safe_load_all(text) if d and d.get("kind") in _IDENTITY_KINDS]
    if sorted(d["kind"] for d in docs) != sorted(_IDENTITY_KINDS):
        raise ClusterError("whereabouts' daemonset-install.yaml no longer holds one "
                           f"{', '.join(_IDENTITY_KINDS)} each")
    return docs


def install(kubeconfig: Path, out_dir: Path, timeout: float = 60) -> Path:
    """Apply whereabouts' identity, wait for its token; write its kubeconfig and flat config
    into out_dir. Returns the flat config's path (the NADs' `configuration_path`)."""
    own_path = _identity.install(kubeconfig, identity_documents(), namespace=NAMESPACE,
                                 account=SERVICE_ACCOUNT,
                                 out=out_dir / "whereabouts.kubeconfig", timeout=timeout)
    flat = out_dir / "whereabouts.conf"
    flat.write_text(json.dumps({
        "datastore": "kubernetes",
        "kubernetes": {"kubeconfig": str(own_path)},
        "log_file": str(out_dir / "whereabouts.log"),
        "log_level": "verbose",
    }, indent=2))
    return flat
