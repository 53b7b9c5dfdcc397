"""A node-side component's own identity in the cluster: its ServiceAccount's long-lived token
and a kubeconfig that uses it, as the component's DaemonSet would mount them on a real
cluster. Shared by whereabouts and Multus, which run as CNI plugins on the real nodes."""

from __future__ import annotations

import base64
import time
from pathlib import Path
from typing import Any

import yaml

from trainmaster.api import app_labels
from trainmaster.cluster._processes import ClusterError
from trainmaster.kubeclient import ApiError, SyncKube


def cluster_identity(name: str, *, namespace: str, account: str, role: str,
                     rules: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """A node daemon's identity: its ServiceAccount, a ClusterRole of ``rules`` and the
    binding between them, labelled as one of the local cluster's network parts."""
    meta = {"labels": app_labels(name, "networks", "local-cluster")}
    return [
        {"apiVersion": "v1", "kind": "ServiceAccount",
         "metadata": {"name": account, "namespace": namespace, **meta}},
        {"apiVersion": "rbac.authorization.k8s.io/v1", "kind": "ClusterRole",
         "metadata": {"name": role, **meta}, "rules": rules},
        {"apiVersion": "rbac.authorization.k8s.io/v1", "kind": "ClusterRoleBinding",
         "metadata": {"name": role, **meta},
         "roleRef": {"apiGroup": "rbac.authorization.k8s.io", "kind": "ClusterRole",
                     "name": role},
         "subjects": [{"kind": "ServiceAccount", "name": account, "namespace": namespace}]},
    ]


def _token_secret(namespace: str, account: str, secret: str) -> dict[str, Any]:
    # A ServiceAccount token Secret lives as long as the cluster (a TokenRequest's expires).
    return {
        "apiVersion": "v1", "kind": "Secret", "type": "kubernetes.io/service-account-token",
        "metadata": {"name": secret, "namespace": namespace,
                     "annotations": {"kubernetes.io/service-account.name": account}},
    }


def install(kubeconfig: Path, documents: list[dict[str, Any]], *, namespace: str,
            account: str, out: Path, timeout: float = 60) -> Path:
    """Apply the identity's documents (ServiceAccount, RBAC) and a token Secret for the
    account; wait for the token; write a kubeconfig using it to ``out`` (mode 0600)."""
    secret = f"{account}-token"
    with SyncKube.connect(kubeconfig) as kube:
        try:
            for doc in [*documents, _token_secret(namespace, account, secret)]:
                kube.apply(doc)
        except ApiError as exc:
            raise ClusterError(f"installing {account}'s identity failed: {exc}") from None
        deadline = time.monotonic() + timeout
        token = ""
        while not token and time.monotonic() < deadline:
            found = kube.get(f"/api/v1/namespaces/{namespace}/secrets/{secret}")
            token = base64.b64decode((found.get("data") or {}).get("token", "")).decode()
            if not token:
                time.sleep(0.2)
    if not token:
        raise ClusterError(f"no token in Secret {namespace}/{secret} after {timeout:.0f}s "
                           "(kube-controller-manager's token controller fills it)")
    admin = yaml.safe_load(kubeconfig.read_text())
    cluster = admin["clusters"][0]["cluster"]
    own = {
        "apiVersion": "v1", "kind": "Config", "current-context": account,
        "clusters": [{"name": "local", "cluster": {
            "server": cluster["server"],
            "certificate-authority": cluster["certificate-authority"]}}],
        "users": [{"name": account, "user": {"token": token}}],
        "contexts": [{"name": account, "context": {
            "cluster": "local", "user": account, "namespace": namespace}}],
    }
    out.parent.mkdir(parents=True, exist_ok=True)
    out.write_text(yaml.safe_dump(own, sort_keys=False))
    out.chmod(0o600)
    return out
