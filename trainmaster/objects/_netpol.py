"""NetworkPolicies: every pod accepts only the traffic it serves.

Each namespace denies all ingress by default; then
- the pods of one job accept each other (rendezvous, NCCL bootstrap) and nobody else;
- metrics ports accept scrapes from the Prometheus namespace (`monitoring.scrapeNamespace`).
Egress stays open: trainers reach storage and object stores the spec does not describe.
The RDMA rails bypass the pod network (Multus secondary interfaces), so these policies
govern only the primary interface.
"""

from __future__ import annotations

from typing import Any

from trainmaster.spec import ClusterSpec

NAMESPACE_NAME_LABEL = "kubernetes.io/metadata.name"
"""Set by the API server on every namespace: selects a namespace by its name."""


def _policy(
    name: str, namespace: str, labels: dict[str, str], spec: dict[str, Any]
) -> dict[str, Any]:
    return {
        "apiVersion": "networking.k8s.io/v1",
        "kind": "NetworkPolicy",
        "metadata": {"name": name, "namespace": namespace, "labels": labels},
        "spec": spec,
    }


def deny_all_ingress(name: str, namespace: str, labels: dict[str, str]) -> dict[str, Any]:
    return _policy(
        name, namespace, labels, {"podSelector": {}, "policyTypes": ["Ingress"], "ingress": []}
    )


def from_scraper(spec: ClusterSpec) -> dict[str, Any]:
    return {
        "namespaceSelector": {
            "matchLabels": {NAMESPACE_NAME_LABEL: spec.monitoring.scrape_namespace}
        }
    }


def allow_metrics(
    spec: ClusterSpec,
    name: str,
    namespace: str,
    labels: dict[str, str],
    pod_selector: dict[str, str],
    port: int | str,
) -> dict[str, Any]:
    """The selected pods accept metrics scrapes on `port` from the Prometheus namespace."""
    return _policy(
        name,
        namespace,
        labels,
        {
            "podSelector": {"matchLabels": pod_selector},
            "policyTypes": ["Ingress"],
            "ingress": [{"from": [from_scraper(spec)], "ports": [{"port": port}]}],
        },
    )


def allow_within_job(
    spec: ClusterSpec, metadata: dict[str, Any], job_selector: dict[str, str]
) -> dict[str, Any]:
    """The pods of one job accept each other on every port (rendezvous, NCCL bootstrap)
    and metrics scrapes; `metadata` comes from the gang's builder (owner included)."""
    return {
        "apiVersion": "networking.k8s.io/v1",
        "kind": "NetworkPolicy",
        "metadata": metadata,
        "spec": {
            "podSelector": {"matchLabels": job_selector},
            "policyTypes": ["Ingress"],
            "ingress": [
                {"from": [{"podSelector": {"matchLabels": job_selector}}]},
                {"from": [from_scraper(spec)], "ports": [{"port": "metrics"}]},
            ],
        },
    }
