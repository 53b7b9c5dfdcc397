"""Register plain Kubernetes object dicts (from trainmaster.objects) with Pulumi.

The objects are built once, in trainmaster.objects; components only hand them to the
Kubernetes provider. A generic resource keyed by the provider's own type token
(``kubernetes:<group>/<version>:<Kind>``, ``core`` for the legacy group) avoids a second,
typed copy of every object.
"""

from __future__ import annotations

from typing import Any

import pulumi
from pulumi_kubernetes import _utilities as k8s_utilities

from trainmaster.objects import immutable_fields


def type_token(obj: dict[str, Any]) -> str:
    api_version = obj["apiVersion"]
    if "/" not in api_version:
        api_version = f"core/{api_version}"
    return f"kubernetes:{api_version}:{obj['kind']}"


def logical_name(obj: dict[str, Any]) -> str:
    """Unique within a stack: kind, namespace and name (Pulumi names must not collide)."""
    meta = obj["metadata"]
    parts = [obj["kind"].lower(), meta.get("namespace"), meta["name"]]
    return "-".join(p for p in parts if p)


class KubernetesObject(pulumi.CustomResource):
    """One Kubernetes object, applied by the pulumi-kubernetes provider as given."""

    def __init__(self, obj: dict[str, Any], opts: pulumi.ResourceOptions | None = None) -> None:
        # Ask for the provider plugin version this SDK was generated for, like the typed
        # pulumi-kubernetes classes do.
        version: str = k8s_utilities.get_version()  # type: ignore[no-untyped-call]
        opts = pulumi.ResourceOptions.merge(opts, pulumi.ResourceOptions(version=version))
        fields = immutable_fields(obj)
        if fields:
            # The API server refuses any update of these fields: replace the object
            # instead, deleting it first (its name is fixed, so the new one cannot exist
            # beside the old). The preview shows it as a replacement.
            opts = pulumi.ResourceOptions.merge(opts, pulumi.ResourceOptions(
                replace_on_changes=list(fields), delete_before_replace=True))
        super().__init__(type_token(obj), logical_name(obj), dict(obj), opts)


def register_objects(
    objs: list[dict[str, Any]], parent: pulumi.Resource, opts: pulumi.ResourceOptions | None = None
) -> list[KubernetesObject]:
    """Register each object as a child of `parent` (merging `opts`: provider, depends_on)."""
    child_opts = pulumi.ResourceOptions.merge(opts, pulumi.ResourceOptions(parent=parent))
    return [KubernetesObject(obj, child_opts) for obj in objs]
