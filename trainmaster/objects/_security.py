"""Where each part runs and under which Pod Security Standard.

Two namespaces per cluster:

- ``<namespace>-system``: trainmaster's own controllers (scheduler, operator). They need
  nothing from the host, so the namespace *enforces* the ``restricted`` standard.
- ``<namespace>``: the training jobs and the node agents. The RDMA device plugin and the GPU
  exporter are privileged DaemonSets; training pods lock memory for RDMA (IPC_LOCK) and
  read the node-local dataset cache (hostPath); the warm-up writes that cache. No Pod
  Security level below ``privileged`` admits those, so this namespace enforces
  ``privileged`` and warns and audits at ``baseline``: every pod that needs more than
  baseline shows up in the audit log. The `privileged-system-daemonsets` policy keeps the
  privileged containers to the two DaemonSets.
"""

from __future__ import annotations

from typing import Any

from trainmaster.api import app_labels
from trainmaster.objects._netpol import deny_all_ingress
from trainmaster.spec import ClusterSpec

PSA_PREFIX = "pod-security.kubernetes.io/"
PSA_VERSION = "latest"
NONROOT_UID = 65532
"""The `nonroot` user of distroless images, which trainmaster's image runs as."""

SECCOMP_RUNTIME_DEFAULT = {"type": "RuntimeDefault"}


def system_namespace(spec: ClusterSpec) -> str:
    """The namespace of the scheduler and the operator."""
    return f"{spec.metadata.namespace}-system"


def psa_labels(enforce: str, warn: str) -> dict[str, str]:
    """Pod Security Admission labels: enforce one level, warn and audit at another."""
    labels = {f"{PSA_PREFIX}enforce": enforce, f"{PSA_PREFIX}enforce-version": PSA_VERSION}
    for mode in ("warn", "audit"):
        labels[f"{PSA_PREFIX}{mode}"] = warn
        labels[f"{PSA_PREFIX}{mode}-version"] = PSA_VERSION
    return labels


def _namespace(name: str, labels: dict[str, str]) -> dict[str, Any]:
    return {"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": name, "labels": labels}}


DENY_INGRESS = "deny-ingress"
"""Each namespace's default NetworkPolicy: no pod accepts traffic unless a policy of its
component says so."""


def build_namespaces(spec: ClusterSpec) -> list[dict[str, Any]]:
    """Both namespaces, with their Pod Security labels."""
    ns, cluster = spec.metadata.namespace, spec.metadata.name
    system = system_namespace(spec)
    return [
        _namespace(
            ns,
            {**app_labels(ns, "namespace", cluster), **psa_labels("privileged", "baseline")},
        ),
        _namespace(
            system,
            {**app_labels(system, "namespace", cluster), **psa_labels("restricted", "restricted")},
        ),
    ]


def build_default_deny(spec: ClusterSpec) -> list[dict[str, Any]]:
    """Each namespace's deny-all-ingress policy (applied once the namespaces exist)."""
    labels = app_labels(DENY_INGRESS, "networks", spec.metadata.name)
    return [
        deny_all_ingress(DENY_INGRESS, name, labels)
        for name in (spec.metadata.namespace, system_namespace(spec))
    ]


def restricted_pod() -> dict[str, Any]:
    """Pod securityContext of the `restricted` standard."""
    return {
        "runAsNonRoot": True,
        "runAsUser": NONROOT_UID,
        "runAsGroup": NONROOT_UID,
        "seccompProfile": dict(SECCOMP_RUNTIME_DEFAULT),
    }


def restricted_container(read_only_root: bool = True) -> dict[str, Any]:
    """Container securityContext of the `restricted` standard."""
    return {
        "runAsNonRoot": True,
        "runAsUser": NONROOT_UID,
        "allowPrivilegeEscalation": False,
        "readOnlyRootFilesystem": read_only_root,
        "capabilities": {"drop": ["ALL"]},
        "seccompProfile": dict(SECCOMP_RUNTIME_DEFAULT),
    }


def confined_container(add: list[str] | None = None) -> dict[str, Any]:
    """For containers that must run as the image's user (training images run as root and
    write where they like): no escalation, RuntimeDefault seccomp, every capability
    dropped except those named."""
    caps: dict[str, Any] = {"drop": ["ALL"]}
    if add:
        caps["add"] = list(add)
    return {
        "allowPrivilegeEscalation": False,
        "capabilities": caps,
        "seccompProfile": dict(SECCOMP_RUNTIME_DEFAULT),
    }


def system_placement(spec: ClusterSpec) -> dict[str, Any]:
    """The pod-spec fields that place the scheduler and the operator (`spec.system`):
    nothing when the spec leaves them anywhere, so default renders stay unchanged."""
    placement = spec.system
    out: dict[str, Any] = {}
    if placement.node_selector:
        out["nodeSelector"] = dict(placement.node_selector)
    if placement.tolerations:
        out["tolerations"] = [
            t.model_dump(by_alias=True, exclude_none=True) for t in placement.tolerations
        ]
    return out
