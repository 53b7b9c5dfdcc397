"""Reading Kubernetes object dicts defensively.

Rules see objects from three places: trainmaster.objects (plain dicts), and Pulumi resource
inputs in the CrossGuard pack (decoded from protobuf, where every number is a float). A
malformed object must yield a finding or nothing, never an exception, so every accessor
here tolerates missing keys and wrong types.
"""

from __future__ import annotations

from collections.abc import Iterator, Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from policies._core import KubeObject

# Workload kinds and where their pod template sits.
_TEMPLATE_PATHS: dict[str, tuple[str, ...]] = {
    "Pod": (),
    "Deployment": ("spec", "template"),
    "StatefulSet": ("spec", "template"),
    "DaemonSet": ("spec", "template"),
    "ReplicaSet": ("spec", "template"),
    "Job": ("spec", "template"),
    "CronJob": ("spec", "jobTemplate", "spec", "template"),
}
_CONTAINER_LISTS = ("initContainers", "containers", "ephemeralContainers")


def get(value: Any, *keys: str) -> Any:
    """value[k1][k2]... or None when any step is missing or not a mapping."""
    for key in keys:
        if not isinstance(value, Mapping):
            return None
        value = value.get(key)
    return value


def mapping(value: Any) -> Mapping[str, Any]:
    return value if isinstance(value, Mapping) else {}


def items(value: Any) -> list[Any]:
    """A list's elements; [] for anything that is not a (non-string) sequence."""
    if isinstance(value, Sequence) and not isinstance(value, str | bytes):
        return list(value)
    return []


def as_int(value: Any) -> int | None:
    """An integral number or numeric string as int (protobuf turns 8 into 8.0); else None."""
    if isinstance(value, bool):
        return None
    if isinstance(value, int):
        return value
    if isinstance(value, float) and value.is_integer():
        return int(value)
    if isinstance(value, str) and value.strip().isdigit():
        return int(value.strip())
    return None


def ref(obj: KubeObject) -> str:
    """How a finding names an object: ``Kind namespace/name`` (``Kind name`` if cluster-wide)."""
    kind = obj.get("kind") or "Object"
    meta = mapping(obj.get("metadata"))
    name = meta.get("name") or "?"
    namespace = meta.get("namespace")
    return f"{kind} {namespace}/{name}" if namespace else f"{kind} {name}"


def labels(obj: Any) -> Mapping[str, Any]:
    return mapping(get(obj, "metadata", "labels"))


@dataclass(frozen=True)
class PodTemplate:
    """The pod of a workload object: its spec, its labels and where it sits in the object."""

    owner: KubeObject
    path: str
    """Field path of the pod spec inside `owner`, e.g. ``spec.template.spec``."""
    spec: Mapping[str, Any]
    labels: Mapping[str, Any]
    labels_path: str
    """Field path of the pod's labels, e.g. ``spec.template.metadata.labels``."""


def pod_templates(obj: KubeObject) -> Iterator[PodTemplate]:
    keys = _TEMPLATE_PATHS.get(str(obj.get("kind")))
    if keys is None:
        return
    template = get(obj, *keys) if keys else obj
    spec = get(template, "spec")
    if isinstance(spec, Mapping):
        path = ".".join((*keys, "spec"))
        labels_path = ".".join((*keys, "metadata", "labels"))
        yield PodTemplate(obj, path, spec, labels(template), labels_path)


@dataclass(frozen=True)
class Container:
    pod: PodTemplate
    path: str
    """Field path of the container inside the owner object."""
    spec: Mapping[str, Any]


def containers(pod: PodTemplate) -> Iterator[Container]:
    for field in _CONTAINER_LISTS:
        for i, container in enumerate(items(pod.spec.get(field))):
            if isinstance(container, Mapping):
                yield Container(pod, f"{pod.path}.{field}[{i}]", container)


def all_containers(objects: Sequence[KubeObject]) -> Iterator[Container]:
    for obj in objects:
        for pod in pod_templates(obj):
            yield from containers(pod)
