"""Fields of the rendered kinds that Kubernetes never lets an update change.

A spec change that reaches one of them (a queue's priority is a PriorityClass's `value`;
`scheduler.preemption` its `preemptionPolicy`) cannot be applied in place: the API server
refuses the update with "field is immutable". Every such field trainmaster renders is
listed here, and the object is replaced instead: deleted, then created. `trainmaster
apply` does that (trainmaster.apply), the Pulumi program marks these fields
`replaceOnChanges` with `deleteBeforeReplace` (components._object), and `trainmaster
plan` says which objects a change replaces.

Kinds trainmaster renders that are not listed (ConfigMap, ServiceAccount, Role,
ClusterRole, NetworkPolicy, Namespace, CRDs and custom resources, admission policies)
have no immutable field that trainmaster sets. StorageClasses and PersistentVolumes are
not rendered from the spec.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from typing import Any

IMMUTABLE_FIELDS: dict[tuple[str, str], tuple[str, ...]] = {
    # (API group, kind): dotted field paths, as Pulumi's replaceOnChanges names them.
    ("scheduling.k8s.io", "PriorityClass"): ("value", "preemptionPolicy"),
    ("apps", "Deployment"): ("spec.selector",),
    ("apps", "DaemonSet"): ("spec.selector",),
    # Headless Services (clusterIP: None) cannot become ClusterIP ones, nor back.
    ("", "Service"): ("spec.clusterIP",),
    ("rbac.authorization.k8s.io", "RoleBinding"): ("roleRef",),
    ("rbac.authorization.k8s.io", "ClusterRoleBinding"): ("roleRef",),
}


def group_kind(obj: Mapping[str, Any]) -> tuple[str, str]:
    api_version = str(obj["apiVersion"])
    return (api_version.split("/")[0] if "/" in api_version else "", str(obj["kind"]))


def immutable_fields(obj: Mapping[str, Any]) -> tuple[str, ...]:
    """The immutable field paths of `obj`'s kind (empty: all of it can be updated)."""
    return IMMUTABLE_FIELDS.get(group_kind(obj), ())


def field_value(obj: Mapping[str, Any], path: str) -> Any:
    value: Any = obj
    for part in path.split("."):
        if not isinstance(value, Mapping):
            return None
        value = value.get(part)
    return value


def changed_immutable_fields(before: Mapping[str, Any], after: Mapping[str, Any]) -> list[str]:
    """The immutable fields whose declared value differs between two renderings."""
    return [p for p in immutable_fields(after) if field_value(before, p) != field_value(after, p)]


def covers_immutable(obj: Mapping[str, Any], field: str) -> bool:
    """Whether the API server's error `field` (e.g. `spec.template.spec.containers[0]`)
    lies in one of `obj`'s immutable fields: replacing the object resolves it."""
    return any(field == p or field.startswith((f"{p}.", f"{p}[")) for p in immutable_fields(obj))


def display_key(obj: Mapping[str, Any]) -> str:
    """Kind/namespace/name, as `plan` and `apply` name an object."""
    meta = obj["metadata"]
    ns = meta.get("namespace")
    return f"{obj['kind']}/{ns + '/' if ns else ''}{meta['name']}"


@dataclass(frozen=True)
class Replacement:
    """An object a change replaces (delete, then create), and the fields that force it."""

    key: str
    fields: tuple[str, ...]

    def to_json(self) -> dict[str, Any]:
        return {"object": self.key, "fields": list(self.fields)}


def replacements(before: Iterable[Mapping[str, Any]], after: Iterable[Mapping[str, Any]]
                 ) -> list[Replacement]:
    """Objects present in both renderings whose immutable fields differ."""
    old = {display_key(o): o for o in before}
    out = []
    for obj in after:
        key = display_key(obj)
        if key in old and (fields := changed_immutable_fields(old[key], obj)):
            out.append(Replacement(key, tuple(fields)))
    return out
