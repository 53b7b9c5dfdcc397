"""Upstream composite (multi-level) groups: a Workload's ``compositePodGroupTemplates``
(``scheduling.k8s.io/v1beta1``) and the ``CompositePodGroup`` object
(``scheduling.k8s.io/v1alpha3``), Kubernetes 1.37, alpha ``CompositePodGroup`` gate.

A composite template holds child PodGroup templates; the PodGroups made from them name
their runtime parent in ``spec.parentCompositePodGroupName``: a CompositePodGroup of that
name, which a workload controller makes from the composite template. Rules
(docs/interop.md):

* The PodGroups of one namespace that name the same parent are **one gang**
  ``<namespace>/scheduling.k8s.io:composite:<parent>``; each child PodGroup is a part
  (its pods' ``part``), placed whole in one domain of the children's topology level, and
  every child inside one domain of the composite's own level: level by level, e.g. each
  replica under one leaf and the whole under one spine (``placement/parts.py``).
  Children may share a domain: the API colocates each child, it does not keep them apart.
* The composite's policy and constraint come from its CompositePodGroup object when one
  exists (the runtime instance, copied from its template when it was made), else from
  the Workload the children's ``workloadRef`` names: the composite template that directly
  holds their template.
  ``gang.minGroupCount`` is how many children must exist before anything is tried; the
  gang's minimum is the sum of the children's ``minCount``. A composite ``basic`` policy
  is read as a gang of every child that exists (not supported as independent children).
* Status: every child PodGroup gets ``PodGroupInitiallyScheduled`` as the composite's
  placement stands, and the CompositePodGroup, when it exists,
  ``CompositePodGroupInitiallyScheduled``. Events go on the first child PodGroup (by
  name).
* Only the children's direct parent is read: a composite inside a composite is placed at
  its own level and its parent's constraint is not applied.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from trainmaster.kubeclient import Kube, Reflector, api_path

from .._keys import (
    COMPOSITE_API_VERSION,
    COMPOSITE_PODGROUP_INITIALLY_SCHEDULED,
    WORKLOAD_API_VERSION,
)
from ..framework.model import PodRequest, TopologyMode
from .convert import UPSTREAM_PREFIX, PodGroupInfo
from .upstream_groups import composite_object_path, topology_constraint

COMPOSITE_PREFIX = f"{UPSTREAM_PREFIX}composite:"
"""Gang names of composite groups (no PodGroup name has a colon: no clash with a child)."""
WORKLOAD_PLURAL = "workloads"


@dataclass(frozen=True, slots=True)
class CompositeTemplate:
    """A Workload's composite pod-group template, as the scheduler uses it."""

    name: str
    min_group_count: int
    """``gang.minGroupCount``; 0 for a ``basic`` policy."""
    constraints: Mapping[str, Any] | None
    """``schedulingConstraints`` as served (``topology[0].key``)."""
    object_name: str = ""
    """The CompositePodGroup read ('' for a Workload's template): where it came from, and
    where its status goes."""
    object_scheduled: bool = False
    """That CompositePodGroup's ``CompositePodGroupInitiallyScheduled`` is True already."""


def _min_group_count(policy: Mapping[str, Any] | None) -> int:
    gang = (policy or {}).get("gang") or {}
    return max(0, int(gang.get("minGroupCount") or 0))


def composite_templates(workload: Mapping[str, Any]) -> dict[str, CompositeTemplate]:
    """PodGroup template name -> the composite template that directly holds it."""
    out: dict[str, CompositeTemplate] = {}

    def walk(templates: Iterable[Mapping[str, Any]]) -> None:
        for raw in templates:
            template = CompositeTemplate(str(raw.get("name") or ""),
                                         _min_group_count(raw.get("schedulingPolicy")),
                                         raw.get("schedulingConstraints"))
            for child in raw.get("podGroupTemplates") or ():
                out[str(child.get("name") or "")] = template
            walk(raw.get("compositePodGroupTemplates") or ())

    walk((workload.get("spec") or {}).get("compositePodGroupTemplates") or ())
    return out


def composite_object(obj: Mapping[str, Any]) -> CompositeTemplate:
    """A v1alpha3 CompositePodGroup as its children's gang uses it: its own policy and
    constraint (its template's name, from its ``workloadRef``, only names it in messages)."""
    spec = obj.get("spec") or {}
    conditions = (obj.get("status") or {}).get("conditions") or []
    return CompositeTemplate(
        str((spec.get("workloadRef") or {}).get("templateName") or ""),
        _min_group_count(spec.get("schedulingPolicy")),
        spec.get("schedulingConstraints"),
        object_name=str((obj.get("metadata") or {}).get("name") or ""),
        object_scheduled=any(c.get("type") == COMPOSITE_PODGROUP_INITIALLY_SCHEDULED
                             and c.get("status") == "True" for c in conditions),
    )


def composite_key(namespace: str, parent: str) -> str:
    return f"{namespace}/{COMPOSITE_PREFIX}{parent}"


def is_composite(key: str) -> bool:
    return key.split("/", 1)[-1].startswith(COMPOSITE_PREFIX)


def missing_composite_message(key: str) -> str:
    namespace, _, gang = key.partition("/")
    return (f"waiting for the PodGroups of composite group {namespace}/"
            f"{gang.removeprefix(COMPOSITE_PREFIX)} ({WORKLOAD_API_VERSION})")


def composite_group_info(namespace: str, parent: str, children: Sequence[PodGroupInfo],
                         template: CompositeTemplate | None,
                         levels: Sequence[str]) -> PodGroupInfo:
    """The gang the child PodGroups of ``parent`` form (``children`` non-empty)."""
    ordered = sorted(children, key=lambda c: c.ref_name)
    first = ordered[0]
    report = template.object_name if template and not template.object_scheduled else ""
    info = dataclasses.replace(
        first,
        name=f"{COMPOSITE_PREFIX}{parent}",
        object_name=first.ref_name,
        min_member=sum(c.min_member for c in ordered),
        max_members=None,
        topology=None,
        queue=next((c.queue for c in ordered if c.queue), None),
        creation_timestamp=min(c.creation_timestamp for c in ordered),
        children=tuple(c.ref_name for c in ordered),
        composite_object=report,
        initially_scheduled=all(c.initially_scheduled for c in ordered) and not report,
        parent_composite="",
        parts_share=True,
    )
    workload = first.workload[0]
    if template is None:
        return dataclasses.replace(info, problem=(
            f"composite group {namespace}/{parent}: waiting for CompositePodGroup "
            f"{namespace}/{parent} ({COMPOSITE_API_VERSION}) or Workload {namespace}/"
            f"{workload or '(no workloadRef)'} with a compositePodGroupTemplate that holds "
            f"PodGroup template {first.workload[1] or '(none)'} ({WORKLOAD_API_VERSION})"))
    bad = next((c for c in ordered if c.invalid or c.problem), None)
    if bad is not None:
        return dataclasses.replace(info, problem=f"PodGroup {namespace}/{bad.ref_name}: "
                                                 f"{bad.invalid or bad.problem}")
    if any(c.elastic for c in ordered):
        return dataclasses.replace(info, problem=(
            f"composite group {namespace}/{parent}: a child PodGroup with a basic policy is "
            "not supported in a composite group; give each child schedulingPolicy.gang"))
    if len(ordered) < template.min_group_count:
        return dataclasses.replace(info, problem=(
            f"composite group {namespace}/{parent}: {len(ordered)} of minGroupCount "
            f"{template.min_group_count} PodGroups exist"))
    whole, invalid = topology_constraint(template.constraints, levels)
    if invalid is not None:
        source = (f"CompositePodGroup {namespace}/{template.object_name}"
                  if template.object_name
                  else f"composite template {template.name} of Workload {workload}")
        return dataclasses.replace(info, invalid=f"{source}: {invalid}")
    child_levels = {c.topology.level for c in ordered if c.topology is not None
                    and c.topology.mode is TopologyMode.REQUIRED}
    if len(child_levels) > 1 or (child_levels and any(c.topology is None for c in ordered)):
        return dataclasses.replace(info, problem=(
            f"composite group {namespace}/{parent}: its PodGroups name different topology "
            f"levels ({', '.join(sorted(child_levels))}, or none); give every child the "
            "same schedulingConstraints"))
    if not child_levels:  # children without a constraint: the whole in one domain only
        return dataclasses.replace(info, topology=whole)
    return dataclasses.replace(info, topology=whole, part_level=child_levels.pop(),
                               whole_level=whole.level if whole is not None else "")


def in_composite(request: PodRequest, parent_of: Mapping[str, str]) -> PodRequest:
    """``request`` in the gang of its PodGroup's composite group (its part: the child
    PodGroup's name), given child gang key -> composite gang key; out of one it has left;
    else itself."""
    composite = (request.gang or "").startswith(COMPOSITE_PREFIX)
    child = f"{UPSTREAM_PREFIX}{request.part}" if composite else request.gang
    if child is None:
        return request
    parent = parent_of.get(f"{request.namespace}/{child}")
    if parent is None:
        return dataclasses.replace(request, gang=child, part="") if composite else request
    return dataclasses.replace(request, gang=parent.split("/", 1)[1],
                               part=child.removeprefix(UPSTREAM_PREFIX))


def workload_path(namespace: str | None = None) -> str:
    return api_path(WORKLOAD_API_VERSION, WORKLOAD_PLURAL, namespace)


def workload_reflector(api: Kube, handler: Any) -> Reflector:
    """Every namespace's Workloads; optional, as the PodGroups' watch is."""
    return Reflector(api, workload_path(), handler, name="workloads.scheduling.k8s.io",
                     optional=True)


def composite_object_reflector(api: Kube, handler: Any) -> Reflector:
    """Every namespace's CompositePodGroups; optional: a cluster that does not serve
    v1alpha3 (or has the gate off) has none, and Workloads' templates still apply."""
    return Reflector(api, composite_object_path(), handler,
                     name="compositepodgroups.scheduling.k8s.io", optional=True)
