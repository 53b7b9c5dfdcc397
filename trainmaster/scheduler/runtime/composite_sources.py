"""Where a composite group's policy and constraint come from (``composites.py``): its
v1alpha3 CompositePodGroup object when one exists (the runtime instance a workload
controller made), else the composite template of the Workload its children's
``workloadRef`` names. The cache keeps one of these and re-forms the composite groups
whose source changed."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from trainmaster.kubeclient import DELETED

from .composites import CompositeTemplate, composite_object, composite_templates


def _key(obj: Mapping[str, Any]) -> tuple[str, str]:
    meta = obj.get("metadata") or {}
    return str(meta.get("namespace") or ""), str(meta.get("name") or "")


class CompositeSources:
    def __init__(self) -> None:
        self.workloads: dict[tuple[str, str], dict[str, CompositeTemplate]] = {}
        """(namespace, Workload) -> its composite templates by child template name."""
        self.objects: dict[tuple[str, str], CompositeTemplate] = {}
        """(namespace, name) -> a CompositePodGroup, as its children's gang reads it."""

    def on_workload(self, kind: str, obj: Mapping[str, Any]) -> tuple[str, str] | None:
        """Records a Workload event: its (namespace, name) when its templates changed."""
        key = _key(obj)
        templates = {} if kind == DELETED else composite_templates(obj)
        if kind == DELETED:
            return key if self.workloads.pop(key, None) is not None else None
        if self.workloads.get(key) == templates:
            return None
        self.workloads[key] = templates
        return key

    def on_object(self, kind: str, obj: Mapping[str, Any]) -> tuple[str, str]:
        """Records a CompositePodGroup event: its (namespace, name)."""
        key = _key(obj)
        if kind == DELETED:
            self.objects.pop(key, None)
        else:
            self.objects[key] = composite_object(obj)
        return key

    def template(self, namespace: str, parent: str,
                 workload_ref: tuple[str, str]) -> CompositeTemplate | None:
        """The composite ``parent``'s policy and constraint, given a child's
        (workloadName, templateName); None while neither source exists."""
        found = self.objects.get((namespace, parent))
        if found is not None:
            return found
        workload, template = workload_ref
        return self.workloads.get((namespace, workload), {}).get(template)
