"""CustomResourceDefinitions trainmaster installs or needs.

TrainingJob is ours. PodGroup follows scheduler-plugins (scheduling.x-k8s.io/v1alpha1).
The monitoring kinds follow the Prometheus operator (monitoring.coreos.com/v1). By default
(`thirdPartyCrds: Skip`) no stand-in is installed: where the operator is absent the appliers
say so and leave its objects out. Only `thirdPartyCrds: IfAbsent` installs stand-ins (inert:
nothing reads them), each only where absent, with schemas that keep unknown fields; the
appliers never touch a CRD that another manager installed (see `foreign_manager`).

NetworkAttachmentDefinition (k8s.cni.cncf.io/v1) has no stand-in: a cluster must have it from
Multus (the local cluster's `cluster up` installs the Network Plumbing Working Group's CRD),
and the appliers say "install Multus" when it lacks it (`REQUIRED_THIRD_PARTY_CRDS`).
"""

from __future__ import annotations

from typing import Any

from trainmaster.api import (
    APP_MANAGED_BY_LABEL,
    APP_PART_OF_LABEL,
    CRD_API_VERSION,
    LOCALQUEUE_KIND,
    LOCALQUEUE_PLURAL,
    LOCALQUEUE_SHORT_NAMES,
    PODGROUP_GROUP,
    PODGROUP_KIND,
    PODGROUP_PLURAL,
    PODGROUP_VERSION,
    STUB_ANNOTATION,
    TRAININGJOB_KIND,
    TRAININGJOB_PLURAL,
    TRAININGJOB_SHORT_NAMES,
)
from trainmaster.api import GROUP as TRAININGJOB_GROUP
from trainmaster.api import VERSION as TRAININGJOB_VERSION
from trainmaster.objects._openapi import openapi_schema
from trainmaster.spec import Job, LocalQueueSpec

_OWN_MANAGERS = frozenset({"trainmaster", "kube-apiserver"})
"""Field managers of a CRD that trainmaster applied: ours (apply) and the API server's own
status writes (Established, NamesAccepted)."""
_PULUMI_MANAGER = "pulumi-kubernetes"
"""Pulumi's Kubernetes provider applies as `pulumi-kubernetes-<random suffix>` per resource."""


def _ours(manager: str) -> bool:
    return manager in _OWN_MANAGERS or manager == _PULUMI_MANAGER \
        or manager.startswith(f"{_PULUMI_MANAGER}-")

_OPEN: dict[str, Any] = {"type": "object", "x-kubernetes-preserve-unknown-fields": True}


def _crd(
    group: str,
    version: str,
    kind: str,
    plural: str,
    scope: str,
    schema: dict[str, Any],
    *,
    short_names: list[str] | None = None,
    columns: list[dict[str, Any]] | None = None,
    status: bool = True,
) -> dict[str, Any]:
    served: dict[str, Any] = {
        "name": version,
        "served": True,
        "storage": True,
        "schema": {"openAPIV3Schema": schema},
    }
    if status:
        served["subresources"] = {"status": {}}
    if columns:
        # Every CRD of ours shows its age last, as kubectl does for built-in kinds.
        served["additionalPrinterColumns"] = [
            *columns, {"name": "Age", "type": "date", "jsonPath": ".metadata.creationTimestamp"}]
    names: dict[str, Any] = {
        "kind": kind,
        "plural": plural,
        "singular": kind.lower(),
        "listKind": f"{kind}List",
    }
    if short_names:
        names["shortNames"] = short_names
    return {
        "apiVersion": CRD_API_VERSION,
        "kind": "CustomResourceDefinition",
        "metadata": {
            "name": f"{plural}.{group}",
            "labels": {APP_PART_OF_LABEL: "trainmaster"},
        },
        "spec": {"group": group, "scope": scope, "names": names, "versions": [served]},
    }


def trainingjob_crd() -> dict[str, Any]:
    condition = {
        "type": "object",
        "properties": {
            k: {"type": "string"}
            for k in ("type", "status", "reason", "message", "lastTransitionTime")
        },
    }
    schema = {
        "type": "object",
        "properties": {
            # Generated from the spec's Job model (trainmaster.objects._openapi); the
            # operator validates the same model, with the cluster's rules on top.
            "spec": {
                **openapi_schema(Job),
                "description": "One job of the cluster spec (jobs[]), as validated there.",
            },
            "status": {
                "type": "object",
                "x-kubernetes-preserve-unknown-fields": True,
                "properties": {
                    "phase": {"type": "string"},
                    "restarts": {"type": "integer"},
                    "gang": {"type": "string"},
                    "lastCheckpoint": {
                        "type": "object",
                        "properties": {
                            "path": {"type": "string"},
                            "step": {"type": "integer"},
                            "time": {"type": "string"},
                        },
                    },
                    "lastRestart": {
                        "type": "object",
                        "properties": {
                            "seconds": {"type": "number", "minimum": 0},
                            "attempt": {"type": "integer"},
                            "time": {"type": "string"},
                        },
                    },
                    "lastHeartbeat": {"type": "string"},
                    "nodes": {"type": "array", "items": {"type": "string"}},
                    "observedGeneration": {"type": "integer"},
                    "conditions": {"type": "array", "items": condition},
                    "lastFailure": {"type": "object", "x-kubernetes-preserve-unknown-fields": True},
                },
            },
        },
    }
    columns = [
        {"name": "Phase", "type": "string", "jsonPath": ".status.phase"},
        {"name": "Nodes", "type": "integer", "jsonPath": ".spec.nodes"},
        {"name": "Restarts", "type": "integer", "jsonPath": ".status.restarts"},
        {"name": "Checkpoint", "type": "string", "jsonPath": ".status.lastCheckpoint.path"},
    ]
    return _crd(TRAININGJOB_GROUP, TRAININGJOB_VERSION, TRAININGJOB_KIND, TRAININGJOB_PLURAL,
                "Namespaced", schema, short_names=list(TRAININGJOB_SHORT_NAMES), columns=columns)


def localqueue_crd() -> dict[str, Any]:
    """Kueue's LocalQueue shape (`spec.clusterQueue`) in trainmaster's group: the scheduler
    resolves a pod's queue label in a team's namespace through it."""
    schema = {
        "type": "object",
        "properties": {
            # Generated from the spec's LocalQueueSpec model, like TrainingJob's.
            "spec": {**openapi_schema(LocalQueueSpec),
                     "description": "Kueue's LocalQueue spec: the queue it charges."},
        },
    }
    columns = [
        {"name": "ClusterQueue", "type": "string", "jsonPath": ".spec.clusterQueue"},
    ]
    return _crd(TRAININGJOB_GROUP, TRAININGJOB_VERSION, LOCALQUEUE_KIND, LOCALQUEUE_PLURAL,
                "Namespaced", schema, short_names=list(LOCALQUEUE_SHORT_NAMES), columns=columns,
                status=False)


def podgroup_crd() -> dict[str, Any]:
    schema = {
        "type": "object",
        "properties": {
            "spec": {
                "type": "object",
                "properties": {
                    "minMember": {"type": "integer", "format": "int32", "minimum": 1},
                    "minResources": {
                        "type": "object",
                        "additionalProperties": {
                            "anyOf": [{"type": "integer"}, {"type": "string"}],
                            "x-kubernetes-int-or-string": True,
                        },
                    },
                    "scheduleTimeoutSeconds": {"type": "integer", "format": "int32"},
                },
            },
            "status": {
                "type": "object",
                "properties": {
                    "phase": {"type": "string"},
                    "occupiedBy": {"type": "string"},
                    "running": {"type": "integer"},
                    "succeeded": {"type": "integer"},
                    "failed": {"type": "integer"},
                    "scheduleStartTime": {"type": "string", "format": "date-time"},
                },
            },
        },
    }
    columns = [
        {"name": "Phase", "type": "string", "jsonPath": ".status.phase"},
        {"name": "MinMember", "type": "integer", "jsonPath": ".spec.minMember"},
    ]
    return _crd(PODGROUP_GROUP, PODGROUP_VERSION, PODGROUP_KIND, PODGROUP_PLURAL, "Namespaced",
                schema, short_names=["pg", "pgs"], columns=columns)


NETWORK_ATTACHMENT_CRD = "network-attachment-definitions.k8s.cni.cncf.io"

REQUIRED_THIRD_PARTY_CRDS: dict[tuple[str, str], tuple[str, str]] = {
    ("k8s.cni.cncf.io", "NetworkAttachmentDefinition"): (NETWORK_ATTACHMENT_CRD, "Multus"),
}
"""Third-party kinds the rendered objects use and trainmaster never stands in for:
(group, kind) -> (CRD name, the project to install). A stored NetworkAttachmentDefinition
that no Multus acts on attaches nothing, so the cluster must really have Multus."""


def prometheus_crds() -> list[dict[str, Any]]:
    schema = {"type": "object", "properties": {"spec": _OPEN}}
    return [
        _stub(_crd("monitoring.coreos.com", "v1", kind, plural, "Namespaced", schema,
                   status=False))
        for kind, plural in (
            ("ServiceMonitor", "servicemonitors"),
            ("PodMonitor", "podmonitors"),
            ("PrometheusRule", "prometheusrules"),
        )
    ]


def _stub(crd: dict[str, Any]) -> dict[str, Any]:
    crd["metadata"]["annotations"] = {STUB_ANNOTATION: "true"}
    return crd


def third_party_crds() -> list[dict[str, Any]]:
    """The stand-ins for other projects' CRDs (the Prometheus operator's)."""
    return prometheus_crds()


THIRD_PARTY_CRD_NAMES = frozenset(c["metadata"]["name"] for c in third_party_crds())


def all_crds() -> list[dict[str, Any]]:
    return [trainingjob_crd(), localqueue_crd(), podgroup_crd(), *third_party_crds()]


def build_crds(third_party: str = "Skip") -> list[dict[str, Any]]:
    """The CRDs a spec installs: ours, plus the third-party stubs only when the spec asks
    for them (`IfAbsent`). Where a stub's CRD already exists, the appliers leave it alone
    (`foreign_manager`)."""
    own = [trainingjob_crd(), localqueue_crd(), podgroup_crd()]
    return all_crds() if third_party == "IfAbsent" else own


def foreign_manager(existing: dict[str, Any]) -> str | None:
    """Who owns an existing CRD if it is not our stub (so we must not apply over it): its
    first field manager that is not ours, or `unknown`; None when it is our stub."""
    meta = existing.get("metadata") or {}
    managers = [m.get("manager") or "" for m in meta.get("managedFields") or []]
    others = [m for m in managers if not _ours(m)]
    if others:
        return others[0]
    if (meta.get("annotations") or {}).get(STUB_ANNOTATION) != "true":
        return (meta.get("labels") or {}).get(APP_MANAGED_BY_LABEL) or "unknown"
    return None
