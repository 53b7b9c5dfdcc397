"""API objects (raw JSON dicts) to the placement core's value types.

Kept apart from the informers so the mapping (quantities, effective requests, taints,
affinity, the topology path from node labels) is unit-testable without a cluster. What
the core cannot express is reported in ``PodInfo.unsupported`` instead of being guessed:
a pod with several OR-ed node affinity terms, ``Gt``/``Lt`` or ``matchFields`` would
otherwise be placed where it may not run.
"""

from __future__ import annotations

import functools
import math
from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from typing import Any

from trainmaster.api import epoch_seconds, parse_quantity

from .._keys import (
    CHECKPOINT_ANNOTATION,
    DATASETS_ANNOTATION,
    MAX_MEMBERS_ANNOTATION,
    POD_GROUP_LABEL,
    PODGROUP_API_VERSION,
    PREEMPT_LOWER,
    QUEUE_LABEL,
    RESTART_ANNOTATION,
    TOPOLOGY_DOMAIN_ANNOTATION,
    TOPOLOGY_MODE_ANNOTATION,
    topology_label,
)
from ..framework.model import (
    CPU,
    NodeInfo,
    NodeSelectorRequirement,
    PodRequest,
    SelectorOperator,
    Taint,
    TaintEffect,
    Toleration,
    TolerationOperator,
    TopologyConstraint,
    TopologyMode,
)
from .jobset_labels import jobset_gang, jobset_part

JSON = dict[str, Any]


def pod_datasets(annotations: Mapping[str, str]) -> tuple[str, ...]:
    """The datasets a pod names in ``trainmaster.io/datasets`` (sorted, no duplicates)."""
    raw = annotations.get(DATASETS_ANNOTATION) or ""
    return tuple(sorted({d.strip() for d in raw.split(",") if d.strip()}))


@functools.lru_cache(maxsize=4096)
def base_units(resource: str, value: str | int | float) -> int:
    """Integer base units as the core counts them: millicores for cpu, else units
    (rounded up, so a fractional request is never under-counted). Remembered: a
    list of 10,000 pods and 5,000 nodes repeats a handful of quantities, and parsing
    each with ``Decimal`` was a third of a new leader's start-up."""
    qty = parse_quantity(value)
    if resource == CPU:
        qty *= 1000
    return max(0, math.ceil(qty))


def resource_map(raw: Mapping[str, Any] | None) -> dict[str, int]:
    return {r: base_units(r, q) for r, q in (raw or {}).items()}


_epoch = functools.lru_cache(maxsize=4096)(epoch_seconds)
"""trainmaster.api.epoch_seconds, remembered: the pods of one Job share their creation
second. 0.0 for an absent or malformed stamp (a checkpoint annotation someone else wrote
must not stop the gang being scheduled)."""


# --- nodes ----------------------------------------------------------------------------


def _taints(raw: Iterable[Mapping[str, Any]] | None) -> tuple[Taint, ...]:
    out = []
    for t in raw or ():
        try:
            effect = TaintEffect(t.get("effect", "NoSchedule"))
        except ValueError:
            continue
        out.append(Taint(t.get("key", ""), t.get("value", "") or "", effect))
    return tuple(out)


def topology_path(labels: Mapping[str, str], levels: Iterable[str]) -> tuple[str, ...]:
    """The node's switch path, top level first; stops at the first missing level label."""
    path: list[str] = []
    for level in levels:
        value = labels.get(topology_label(level))
        if not value:
            break
        path.append(value)
    return tuple(path)


def node_info(obj: JSON, levels: tuple[str, ...]) -> NodeInfo:
    meta = obj.get("metadata") or {}
    spec = obj.get("spec") or {}
    status = obj.get("status") or {}
    labels = meta.get("labels") or {}
    return NodeInfo(
        name=meta["name"],
        allocatable=resource_map(status.get("allocatable")),
        labels=labels,
        taints=_taints(spec.get("taints")),
        unschedulable=bool(spec.get("unschedulable")),
        topology=topology_path(labels, levels),
    )


# --- pods -----------------------------------------------------------------------------


@dataclass(frozen=True, slots=True)
class PodInfo:
    """What the runtime needs of a pod: the core's request plus API-side facts."""

    request: PodRequest
    scheduler_name: str
    node_name: str
    phase: str
    terminating: bool
    controlled: bool
    """Has a controller owner (Job, ReplicaSet ...) that recreates it if deleted."""
    unsupported: str | None = None
    queue: str | None = None
    """The pod's ``kueue.x-k8s.io/queue-name`` label."""
    preempts: bool = True
    """``spec.preemptionPolicy`` is PreemptLowerPriority (the API server's default)."""
    started: float = 0.0
    """``status.startTime`` (else creation time): when its work began."""
    nominated_node: str = ""
    """``status.nominatedNodeName``: a node freed for it by preemption."""

    @property
    def finished(self) -> bool:
        return self.phase in ("Succeeded", "Failed")


def _sum_requests(containers: Iterable[Mapping[str, Any]]) -> dict[str, int]:
    total: dict[str, int] = {}
    for c in containers:
        for r, q in resource_map((c.get("resources") or {}).get("requests")).items():
            total[r] = total.get(r, 0) + q
    return total


def pod_requests(spec: Mapping[str, Any]) -> dict[str, int]:
    """Kubernetes' effective pod request: containers summed, the largest init container
    if larger (sidecars with restartPolicy Always add to both), plus pod overhead."""
    total = _sum_requests(spec.get("containers") or ())
    sidecars: dict[str, int] = {}
    for init in spec.get("initContainers") or ():
        req = _sum_requests((init,))
        if init.get("restartPolicy") == "Always":
            for r, q in req.items():
                sidecars[r] = sidecars.get(r, 0) + q
                total[r] = total.get(r, 0) + q
        else:
            for r, q in req.items():
                total[r] = max(total.get(r, 0), q + sidecars.get(r, 0))
    for r, q in resource_map(spec.get("overhead")).items():
        total[r] = total.get(r, 0) + q
    return total


def _tolerations(raw: Iterable[Mapping[str, Any]] | None) -> tuple[Toleration, ...]:
    out = []
    for t in raw or ():
        op = TolerationOperator(t.get("operator") or "Equal")
        effect = TaintEffect(t["effect"]) if t.get("effect") else None
        out.append(Toleration(t.get("key", "") or "", op, t.get("value", "") or "", effect))
    return tuple(out)


def _affinity(spec: Mapping[str, Any]) -> tuple[tuple[NodeSelectorRequirement, ...], str | None]:
    required = (
        ((spec.get("affinity") or {}).get("nodeAffinity") or {}).get(
            "requiredDuringSchedulingIgnoredDuringExecution"
        )
        or {}
    )
    terms = required.get("nodeSelectorTerms") or []
    if not terms:
        return (), None
    if len(terms) > 1:
        return (), "several nodeSelectorTerms (OR) are not supported"
    term = terms[0]
    if term.get("matchFields"):
        return (), "nodeAffinity matchFields are not supported"
    out = []
    for expr in term.get("matchExpressions") or ():
        try:
            op = SelectorOperator(expr["operator"])
        except ValueError:
            return (), f"nodeAffinity operator {expr['operator']} is not supported"
        out.append(NodeSelectorRequirement(expr["key"], op, tuple(expr.get("values") or ())))
    return tuple(out), None


UPSTREAM_PREFIX = "scheduling.k8s.io:"
"""Gang names of upstream PodGroups start with this, so that a scheduler-plugins PodGroup of
the same name in the same namespace stays another gang (no PodGroup name has a colon)."""


def scheduling_group_gang(spec: Mapping[str, Any]) -> str | None:
    """The gang name of the upstream PodGroup a pod names in ``spec.schedulingGroup``."""
    name = (spec.get("schedulingGroup") or {}).get("podGroupName")
    return f"{UPSTREAM_PREFIX}{name}" if name else None


def pod_info(obj: JSON) -> PodInfo:
    meta = obj.get("metadata") or {}
    spec = obj.get("spec") or {}
    status = obj.get("status") or {}
    labels = meta.get("labels") or {}
    affinity, unsupported = _affinity(spec)
    try:
        tolerations = _tolerations(spec.get("tolerations"))
    except ValueError as err:
        tolerations, unsupported = (), f"toleration: {err}"
    request = PodRequest(
        name=meta["name"],
        namespace=meta.get("namespace", "default"),
        uid=meta["uid"],
        requests=pod_requests(spec),
        node_selector=spec.get("nodeSelector") or {},
        affinity=affinity,
        tolerations=tolerations,
        priority=int(spec.get("priority") or 0),
        creation_timestamp=_epoch(meta.get("creationTimestamp")),
        # The precedence rule (docs/interop.md): spec.schedulingGroup, then the
        # scheduler-plugins PodGroup label, then a JobSet's labels.
        gang=(scheduling_group_gang(spec) or labels.get(POD_GROUP_LABEL)
              or jobset_gang(labels) or None),
        datasets=pod_datasets(meta.get("annotations") or {}),
        part="" if labels.get(POD_GROUP_LABEL) else jobset_part(labels),
    )
    return PodInfo(
        request=request,
        scheduler_name=spec.get("schedulerName", "default-scheduler"),
        node_name=spec.get("nodeName") or "",
        phase=status.get("phase", "Pending"),
        terminating=bool(meta.get("deletionTimestamp")),
        controlled=any(o.get("controller") for o in meta.get("ownerReferences") or ()),
        unsupported=unsupported,
        queue=labels.get(QUEUE_LABEL) or None,
        preempts=(spec.get("preemptionPolicy") or PREEMPT_LOWER) == PREEMPT_LOWER,
        started=_epoch(status.get("startTime")) or request.creation_timestamp,
        nominated_node=status.get("nominatedNodeName") or "",
    )


# --- pod groups -----------------------------------------------------------------------


@dataclass(frozen=True, slots=True)
class PodGroupInfo:
    """A PodGroup as the runtime uses it: a scheduler-plugins one, or an upstream
    ``scheduling.k8s.io`` one (``upstream_groups.py``) whose ``name`` is its gang name."""

    namespace: str
    name: str
    uid: str
    min_member: int
    topology: TopologyConstraint | None
    """From the trainmaster.io/topology-* annotations; None: use the config's policy."""
    creation_timestamp: float
    queue: str | None = None
    """The PodGroup's ``kueue.x-k8s.io/queue-name`` label."""
    last_checkpoint: float = 0.0
    """``trainmaster.io/last-checkpoint-time``: 0 when its job never reported one."""
    restart_seconds: float = 0.0
    """``trainmaster.io/restart-seconds``: how long its job takes to come back after an
    eviction (0 when absent or unreadable); part of its price as a victim."""
    max_members: int | None = None
    """``trainmaster.io/max-members`` of an elastic gang (above ``min_member``); None:
    rigid, or an unreadable value (then the gang is rigid at minMember)."""
    part_level: str = ""
    """A JobSet's exclusive-topology level: each Job in its own domain (``jobsets.py``)."""
    problem: str | None = None
    """Why the gang cannot be scheduled as its object stands (told, not guessed)."""

    api_version: str = PODGROUP_API_VERSION
    object_name: str = ""
    """The object's own name when ``name`` (the gang name) differs from it."""
    invalid: str | None = None
    """Why the group can never be placed as it stands (its gang waits with this)."""
    initially_scheduled: bool = False
    """An upstream group's ``PodGroupInitiallyScheduled`` is already True."""
    parent_composite: str = ""
    """An upstream PodGroup's ``spec.parentCompositePodGroupName`` (``composites.py``)."""
    workload: tuple[str, str] = ("", "")
    """An upstream PodGroup's ``spec.workloadRef``: (workloadName, templateName)."""
    whole_level: str = ""
    """A composite group's own level, around its children's (``Gang.whole_level``)."""
    parts_share: bool = False
    """A composite group's children may share a domain (``Gang.parts_share``)."""
    children: tuple[str, ...] = ()
    """A composite group's child PodGroups: each gets its status condition."""
    composite_object: str = ""
    """A composite group's v1alpha3 CompositePodGroup, to report on as on its children
    ('' when none exists, or its condition is True already)."""

    @property
    def elastic(self) -> bool:
        return self.max_members is not None

    @property
    def ref_name(self) -> str:
        """The name Events and status writes address."""
        return self.object_name or self.name

    @property
    def key(self) -> str:
        return f"{self.namespace}/{self.name}"


def pod_group_info(obj: JSON) -> PodGroupInfo:
    meta = obj.get("metadata") or {}
    annotations = meta.get("annotations") or {}
    domain = annotations.get(TOPOLOGY_DOMAIN_ANNOTATION)
    topology = None
    if domain:
        mode_text = annotations.get(TOPOLOGY_MODE_ANNOTATION, "preferred")
        try:
            mode = TopologyMode(mode_text)
        except ValueError:
            mode = TopologyMode.PREFERRED
        topology = TopologyConstraint(domain, mode)
    return PodGroupInfo(
        namespace=meta.get("namespace", "default"),
        name=meta["name"],
        uid=meta.get("uid", ""),
        min_member=max(0, int((obj.get("spec") or {}).get("minMember") or 0)),
        topology=topology,
        creation_timestamp=_epoch(meta.get("creationTimestamp")),
        queue=(meta.get("labels") or {}).get(QUEUE_LABEL) or None,
        last_checkpoint=_epoch(annotations.get(CHECKPOINT_ANNOTATION)),
        max_members=_max_members(annotations.get(MAX_MEMBERS_ANNOTATION)),
        restart_seconds=_seconds(annotations.get(RESTART_ANNOTATION)),
    )


def _seconds(text: str | None) -> float:
    try:
        value = float(text) if text else 0.0
    except ValueError:
        return 0.0
    return value if value > 0 and value != float("inf") else 0.0


def _max_members(text: str | None) -> int | None:
    try:
        value = int(text) if text else 0
    except ValueError:
        return None
    return value if value > 0 else None
