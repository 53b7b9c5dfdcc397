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

import base64
import json
import time
from pathlib import Path
from typing import Any

import yaml

from trainmaster.cluster._processes import ClusterError
from trainmaster.kubeclient import ApiError, SyncKube
from trainmaster.toolchain import tool_path

NAMESPACE = "kube-system"
SERVICE_ACCOUNT = "whereabouts"
TOKEN_SECRET = "whereabouts-token"
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


def _token_secret() -> dict[str, Any]:
    # A ServiceAccount token Secret lives as long as the cluster (a TokenRequest's expires).
    return {
        "apiVersion": "v1", "kind": "Secret", "type": "kubernetes.io/service-account-token",
        "metadata": {"name": TOKEN_SECRET, "namespace": NAMESPACE,
                     "annotations": {"kubernetes.io/service-account.name": SERVICE_ACCOUNT}},
    }


def install(kubeconfig: Path, out_dir: Path, timeout: float = 60) -> Path:
    """Apply whereabouts' identity, wait for its token; write its kubeconfig and flat config
    into out_dir. Returns the flat config's path (the NADs' `configuration_path`)."""
    with SyncKube.connect(kubeconfig) as kube:
        try:
            for doc in [*identity_documents(), _token_secret()]:
                kube.apply(doc)
        except ApiError as exc:
            raise ClusterError(f"installing whereabouts' identity failed: {exc}") from None
        deadline = time.monotonic() + timeout
        token = ""
        while not token and time.monotonic() < deadline:
            secret = kube.get(f"/api/v1/namespaces/{NAMESPACE}/secrets/{TOKEN_SECRET}")
            token = base64.b64decode((secret.get("data") or {}).get("token", "")).decode()
            if not token:
                time.sleep(0.2)
    if not token:
        raise ClusterError(f"no token in Secret {NAMESPACE}/{TOKEN_SECRET} after {timeout:.0f}s "
                           "(kube-controller-manager's token controller fills it)")
    admin = yaml.safe_load(kubeconfig.read_text())
    cluster = admin["clusters"][0]["cluster"]
    own = {
        "apiVersion": "v1", "kind": "Config", "current-context": "whereabouts",
        "clusters": [{"name": "local", "cluster": {
            "server": cluster["server"],
            "certificate-authority": cluster["certificate-authority"]}}],
        "users": [{"name": SERVICE_ACCOUNT, "user": {"token": token}}],
        "contexts": [{"name": "whereabouts", "context": {
            "cluster": "local", "user": SERVICE_ACCOUNT, "namespace": NAMESPACE}}],
    }
    out_dir.mkdir(parents=True, exist_ok=True)
    own_path = out_dir / "whereabouts.kubeconfig"
    own_path.write_text(yaml.safe_dump(own, sort_keys=False))
    own_path.chmod(0o600)
    flat = out_dir / "whereabouts.conf"
    flat.write_text(json.dumps({
        "datastore": "kubernetes",
        "kubernetes": {"kubeconfig": str(own_path)},
        "log_file": str(out_dir / "whereabouts.log"),
        "log_level": "verbose",
    }, indent=2))
    return flat
