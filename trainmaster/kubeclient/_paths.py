"""API paths, one helper per resource: ``*_API_VERSION`` is always an apiVersion
(``group/version``), a ``*_path`` function always a URL path.

The apiVersions come from trainmaster.api (dependency-free, so a scheduler start loads no
spec model).
"""

from __future__ import annotations

from typing import Any
from urllib.parse import quote

from trainmaster.api import API_VERSION as TRAININGJOB_API_VERSION
from trainmaster.api import (
    CRD_API_VERSION,
    LOCALQUEUE_KIND,
    LOCALQUEUE_PLURAL,
    PODGROUP_API_VERSION,
)

KNOWN_PLURALS: dict[tuple[str, str], str] = {
    ("v1", "ConfigMap"): "configmaps",
    ("v1", "Event"): "events",
    ("v1", "Namespace"): "namespaces",
    ("v1", "Node"): "nodes",
    ("v1", "PersistentVolume"): "persistentvolumes",
    ("v1", "PersistentVolumeClaim"): "persistentvolumeclaims",
    ("v1", "Pod"): "pods",
    ("v1", "Service"): "services",
    ("v1", "ServiceAccount"): "serviceaccounts",
    ("rbac.authorization.k8s.io/v1", "Role"): "roles",
    ("rbac.authorization.k8s.io/v1", "RoleBinding"): "rolebindings",
    ("networking.k8s.io/v1", "NetworkPolicy"): "networkpolicies",
    ("batch/v1", "Job"): "jobs",
    (PODGROUP_API_VERSION, "PodGroup"): "podgroups",
    (TRAININGJOB_API_VERSION, "TrainingJob"): "trainingjobs",
    (TRAININGJOB_API_VERSION, LOCALQUEUE_KIND): LOCALQUEUE_PLURAL,
}
"""(apiVersion, kind) -> plural of the kinds trainmaster's components touch; any other
kind is looked up by discovery (``Kube.resource``)."""


def api_path(api_version: str, plural: str, namespace: str | None = None,
             name: str | None = None, sub: str | None = None) -> str:
    """``/api/v1/...`` for the core group, ``/apis/<group>/<version>/...`` otherwise."""
    parts = [f"/apis/{api_version}" if "/" in api_version else f"/api/{api_version}"]
    if namespace:
        parts.append(f"namespaces/{quote(namespace)}")
    parts.append(plural)
    if name:
        parts.append(quote(name))
    if sub:
        parts.append(sub)
    return "/".join(parts)


def pod_path(namespace: str | None = None, name: str | None = None, sub: str | None = None
             ) -> str:
    """Pods of a namespace (or of all namespaces when None), one pod, or its subresource."""
    return api_path("v1", "pods", namespace, name, sub)


def node_path(name: str | None = None, sub: str | None = None) -> str:
    return api_path("v1", "nodes", None, name, sub)


def namespace_path(name: str | None = None) -> str:
    return api_path("v1", "namespaces", None, name)


def event_path(namespace: str) -> str:
    return api_path("v1", "events", namespace)


def job_path(namespace: str, name: str | None = None) -> str:
    return api_path("batch/v1", "jobs", namespace, name)


def podgroup_path(namespace: str | None = None, name: str | None = None) -> str:
    return api_path(PODGROUP_API_VERSION, "podgroups", namespace, name)


def localqueue_path(namespace: str | None = None, name: str | None = None) -> str:
    """LocalQueues of a namespace (or of all namespaces when None), or one."""
    return api_path(TRAININGJOB_API_VERSION, LOCALQUEUE_PLURAL, namespace, name)


def trainingjob_path(namespace: str | None = None, name: str | None = None,
                     sub: str | None = None) -> str:
    return api_path(TRAININGJOB_API_VERSION, "trainingjobs", namespace, name, sub)


def crd_path(name: str | None = None) -> str:
    return api_path(CRD_API_VERSION, "customresourcedefinitions", None, name)


def object_path(obj: dict[str, Any], plural: str | None = None, sub: str | None = None) -> str:
    """The path of ``obj`` itself; ``plural`` may be left out for the known kinds."""
    api_version, kind = obj["apiVersion"], obj["kind"]
    meta = obj["metadata"]
    return api_path(api_version, plural or KNOWN_PLURALS[(api_version, kind)],
                    meta.get("namespace"), meta["name"], sub)
