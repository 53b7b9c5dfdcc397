"""The few API calls the operator makes, on raw JSON (dicts), over kubernetes_asyncio.

Responses are not turned into the generated model classes: that costs CPU on every list,
and everything downstream (trainmaster.objects, the fault code) speaks plain dicts anyway.
"""

from __future__ import annotations

import os
from pathlib import Path
from typing import Any

from kubernetes_asyncio import client, config
from kubernetes_asyncio.client.exceptions import ApiException

from trainmaster.kube import async_client
from trainmaster.objects import (
    FIELD_MANAGER,
    PODGROUP_GROUP,
    PODGROUP_PLURAL,
    PODGROUP_VERSION,
    TRAININGJOB_GROUP,
    TRAININGJOB_PLURAL,
    TRAININGJOB_VERSION,
)

APPLY = "application/apply-patch+yaml"
MERGE = "application/merge-patch+json"
STRATEGIC = "application/strategic-merge-patch+json"

REQUEST_TIMEOUT = 30
"""Seconds before one API call is abandoned (and the reconcile retried)."""
TRAININGJOB_API = f"{TRAININGJOB_GROUP}/{TRAININGJOB_VERSION}"
PODGROUP_API = f"{PODGROUP_GROUP}/{PODGROUP_VERSION}"

# (apiVersion, kind) -> plural, for the kinds the operator touches.
PLURALS = {
    ("v1", "Service"): "services",
    ("v1", "ConfigMap"): "configmaps",
    ("v1", "Pod"): "pods",
    ("v1", "Node"): "nodes",
    ("v1", "Event"): "events",
    ("v1", "ServiceAccount"): "serviceaccounts",
    ("rbac.authorization.k8s.io/v1", "Role"): "roles",
    ("rbac.authorization.k8s.io/v1", "RoleBinding"): "rolebindings",
    ("networking.k8s.io/v1", "NetworkPolicy"): "networkpolicies",
    ("batch/v1", "Job"): "jobs",
    (PODGROUP_API, "PodGroup"): PODGROUP_PLURAL,
    (TRAININGJOB_API, "TrainingJob"): TRAININGJOB_PLURAL,
}

__all__ = ["ApiException", "Kube", "is_status", "open_kube"]


def is_status(exc: BaseException, *codes: int) -> bool:
    return isinstance(exc, ApiException) and exc.status in codes


def path(api_version: str, plural: str, namespace: str | None = None,
         name: str | None = None, sub: str | None = None) -> str:
    base = f"/api/{api_version}" if "/" not in api_version else f"/apis/{api_version}"
    parts = [base]
    if namespace:
        parts.append(f"namespaces/{namespace}")
    parts.append(plural)
    if name:
        parts.append(name)
    if sub:
        parts.append(sub)
    return "/".join(parts)


def object_path(obj: dict[str, Any], sub: str | None = None) -> str:
    plural = PLURALS[(obj["apiVersion"], obj["kind"])]
    meta = obj["metadata"]
    return path(obj["apiVersion"], plural, meta.get("namespace"), meta["name"], sub)


class Kube:
    """Thin async REST over one ApiClient. Methods raise ApiException on HTTP errors."""

    def __init__(self, api: client.ApiClient) -> None:
        self.api = api

    async def close(self) -> None:
        await self.api.close()

    async def request(
        self,
        method: str,
        url: str,
        body: Any = None,
        query: dict[str, Any] | None = None,
        content_type: str | None = None,
    ) -> Any:
        headers = {"Accept": "application/json"}
        if content_type:
            headers["Content-Type"] = content_type
        return await self.api.call_api(
            url,
            method,
            query_params=list((query or {}).items()),
            header_params=headers,
            body=body,
            response_types_map={200: "object", 201: "object", 202: "object"},
            auth_settings=["BearerToken"],
            _return_http_data_only=True,
            _request_timeout=REQUEST_TIMEOUT,
        )

    async def get(self, url: str) -> dict[str, Any]:
        result: dict[str, Any] = await self.request("GET", url)
        return result

    async def list(self, url: str, selector: str | None = None) -> list[dict[str, Any]]:
        query = {"labelSelector": selector} if selector else None
        result = await self.request("GET", url, query=query)
        return list(result.get("items") or [])

    async def apply(self, obj: dict[str, Any]) -> dict[str, Any]:
        """Server-side apply as FIELD_MANAGER, forcing: what we declare wins over hand edits
        of the same fields (drift), fields others own are left alone."""
        result: dict[str, Any] = await self.request(
            "PATCH", object_path(obj), obj,
            {"fieldManager": FIELD_MANAGER, "force": "true"}, APPLY,
        )
        return result

    async def patch(self, url: str, body: dict[str, Any], content_type: str = MERGE) -> Any:
        return await self.request("PATCH", url, body, None, content_type)

    async def create(self, url: str, body: dict[str, Any]) -> Any:
        return await self.request("POST", url, body)

    async def delete(
        self, url: str, propagation: str | None = None, grace: int | None = None
    ) -> bool:
        """Delete; False when it was already gone."""
        options: dict[str, Any] = {"kind": "DeleteOptions", "apiVersion": "v1"}
        if propagation:
            options["propagationPolicy"] = propagation
        if grace is not None:
            options["gracePeriodSeconds"] = grace
        try:
            await self.request("DELETE", url, options)
        except ApiException as exc:
            if exc.status == 404:
                return False
            raise
        return True

    # --- paths the operator uses often -------------------------------------------

    @staticmethod
    def trainingjob(namespace: str, name: str | None = None, sub: str | None = None) -> str:
        return path(TRAININGJOB_API, TRAININGJOB_PLURAL, namespace, name, sub)

    @staticmethod
    def pods(namespace: str, name: str | None = None) -> str:
        return path("v1", "pods", namespace, name)

    @staticmethod
    def jobs(namespace: str, name: str | None = None) -> str:
        return path("batch/v1", "jobs", namespace, name)

    @staticmethod
    def podgroups(namespace: str, name: str | None = None) -> str:
        return path(PODGROUP_API, PODGROUP_PLURAL, namespace, name)

    @staticmethod
    def node(name: str) -> str:
        return path("v1", "nodes", None, name)


async def open_kube(kubeconfig: Path | None) -> Kube:
    """A client from the kubeconfig, or in-cluster credentials when running in a pod."""
    if kubeconfig is None and os.environ.get("KUBERNETES_SERVICE_HOST"):
        cfg = client.Configuration()
        config.load_incluster_config(client_configuration=cfg)
        cfg.connection_pool_maxsize = 32
        return Kube(client.ApiClient(cfg))
    return Kube(await async_client(kubeconfig, pool=32))
