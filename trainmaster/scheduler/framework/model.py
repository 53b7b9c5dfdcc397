"""Value types the placement core works on: nodes, pods, gangs.

Everything is immutable and API-free. Quantities are plain ``int`` in base units:
``nvidia.com/gpu`` and RDMA resources (``rdma/rail0``) are device counts, ``cpu`` is
millicores, ``memory`` is bytes, ``pods`` is a pod count. A resource missing from a
node's ``allocatable`` is 0 there. Every pod implicitly requests one ``pods`` slot,
as in Kubernetes.
"""

from __future__ import annotations

import dataclasses
import enum
from collections.abc import Mapping
from dataclasses import dataclass, field
from types import MappingProxyType

from .._keys import CLUSTER_DOMAIN, GPU_RESOURCE

GPU = GPU_RESOURCE
CPU = "cpu"
MEMORY = "memory"
PODS = "pods"

NODE_LEVEL = "node"
"""Topology level of a single node (the smallest domain)."""
CLUSTER_LEVEL = CLUSTER_DOMAIN
"""Topology level of the whole cluster (the largest domain)."""


def _frozen_map(values: Mapping[str, int], what: str) -> Mapping[str, int]:
    out: dict[str, int] = {}
    for key, qty in values.items():
        if qty < 0:
            raise ValueError(f"{what}[{key!r}] is negative: {qty}")
        if qty:
            out[key] = qty
    return MappingProxyType(out)


class TaintEffect(enum.StrEnum):
    NO_SCHEDULE = "NoSchedule"
    PREFER_NO_SCHEDULE = "PreferNoSchedule"
    NO_EXECUTE = "NoExecute"


@dataclass(frozen=True, slots=True)
class Taint:
    key: str
    value: str = ""
    effect: TaintEffect = TaintEffect.NO_SCHEDULE


class TolerationOperator(enum.StrEnum):
    EQUAL = "Equal"
    EXISTS = "Exists"


@dataclass(frozen=True, slots=True)
class Toleration:
    """Kubernetes toleration. An empty ``key`` with ``Exists`` tolerates every taint;
    ``effect=None`` matches all effects."""

    key: str = ""
    operator: TolerationOperator = TolerationOperator.EQUAL
    value: str = ""
    effect: TaintEffect | None = None

    def tolerates(self, taint: Taint) -> bool:
        if self.effect is not None and self.effect != taint.effect:
            return False
        if self.operator is TolerationOperator.EXISTS:
            return not self.key or self.key == taint.key
        return self.key == taint.key and self.value == taint.value


class SelectorOperator(enum.StrEnum):
    IN = "In"
    NOT_IN = "NotIn"
    EXISTS = "Exists"
    DOES_NOT_EXIST = "DoesNotExist"


@dataclass(frozen=True, slots=True)
class NodeSelectorRequirement:
    """One ``matchExpressions`` entry of required node affinity."""

    key: str
    operator: SelectorOperator
    values: tuple[str, ...] = ()

    def __post_init__(self) -> None:
        needs_values = self.operator in (SelectorOperator.IN, SelectorOperator.NOT_IN)
        if needs_values != bool(self.values):
            raise ValueError(
                f"{self.operator} on {self.key!r}: values must be "
                f"{'non-empty' if needs_values else 'empty'}"
            )


@dataclass(frozen=True)
class NodeInfo:
    """A node as the scheduler sees it.

    ``topology`` is the node's switch-domain path from the top level down to its leaf,
    e.g. ``("spine-0", "leaf-3")``; the level names (``("spine", "leaf")``) belong to
    the snapshot. ``requested`` is usage by pods this scheduler does not track
    (daemonsets, system pods); pods it places are accounted by the snapshot.
    """

    name: str
    allocatable: Mapping[str, int]
    labels: Mapping[str, str] = field(default_factory=dict)
    taints: tuple[Taint, ...] = ()
    unschedulable: bool = False
    topology: tuple[str, ...] = ()
    requested: Mapping[str, int] = field(default_factory=dict)

    def __post_init__(self) -> None:
        object.__setattr__(self, "allocatable", _frozen_map(self.allocatable, "allocatable"))
        object.__setattr__(self, "requested", _frozen_map(self.requested, "requested"))
        object.__setattr__(self, "labels", MappingProxyType(dict(self.labels)))


@dataclass(frozen=True)
class PodRequest:
    """A pod waiting to be placed. ``uid`` defaults to ``namespace/name``."""

    name: str
    namespace: str = "default"
    uid: str = ""
    requests: Mapping[str, int] = field(default_factory=dict)
    node_selector: Mapping[str, str] = field(default_factory=dict)
    affinity: tuple[NodeSelectorRequirement, ...] = ()
    """Required node affinity: one term, all expressions must match (AND)."""
    tolerations: tuple[Toleration, ...] = ()
    priority: int = 0
    creation_timestamp: float = 0.0
    gang: str | None = None
    """Name of the pod's gang in the same namespace, or ``None`` for a lone pod."""
    datasets: tuple[str, ...] = ()
    """Datasets the pod reads (``trainmaster.io/datasets``): a score preference only."""
    part: str = ""
    """Its part of a gang placed part by part (``Gang.part_level``): a JobSet's Job."""

    key: str = field(init=False, repr=False, compare=False)
    effective_requests: Mapping[str, int] = field(init=False, repr=False, compare=False)
    """``requests`` plus the implicit ``pods: 1``."""

    def __post_init__(self) -> None:
        requests = _frozen_map(self.requests, f"{self.namespace}/{self.name} requests")
        effective = dict(requests)
        effective.setdefault(PODS, 1)
        sets = object.__setattr__
        sets(self, "requests", requests)
        sets(self, "node_selector", MappingProxyType(dict(self.node_selector)))
        sets(self, "key", f"{self.namespace}/{self.name}")
        sets(self, "uid", self.uid or self.key)
        sets(self, "effective_requests", MappingProxyType(effective))

    @property
    def gang_key(self) -> str | None:
        return None if self.gang is None else f"{self.namespace}/{self.gang}"


class TopologyMode(enum.StrEnum):
    REQUIRED = "required"
    """Place in one domain of the level (or a smaller one) or not at all."""
    PREFERRED = "preferred"
    """Try the level first; fall back to larger domains up to the whole cluster."""


@dataclass(frozen=True, slots=True)
class TopologyConstraint:
    """``level`` is ``"node"``, one of the snapshot's level names, or ``"cluster"``."""

    level: str = CLUSTER_LEVEL
    mode: TopologyMode = TopologyMode.PREFERRED


SizeRule = tuple[int | None, TopologyConstraint]
"""(largest group size in pods it covers, or None for every size; the constraint)."""


@dataclass(frozen=True)
class Gang:
    """A pod group scheduled all-or-nothing.

    ``min_member`` is how many members must exist before the gang is considered at all
    (0 means ``len(members)``); once it is ready, *every* member is placed, or none.

    An ``elastic`` gang is all-or-nothing for ``required_members`` only: the placement
    takes the largest number of members, from ``len(members)`` down to
    ``required_members``, that fits (``sized``); the rest stay pending and are placed
    later, when capacity frees (a *grow*: a gang with ``placed`` members running).
    """

    name: str
    members: tuple[PodRequest, ...]
    namespace: str = "default"
    min_member: int = 0
    topology: TopologyConstraint = TopologyConstraint()
    priority: int = 0
    creation_timestamp: float = 0.0
    elastic: bool = False
    placed: int = 0
    """Members of the group already placed (assumed or bound) outside ``members``."""
    size_rules: tuple[SizeRule, ...] = ()
    """An elastic gang's topology by the group's size (``placed`` + members placed): the
    first rule covering it, else the whole cluster, preferred. Empty: ``topology`` at
    every size."""
    part_level: str = ""
    """When set, the members are placed part by part (``PodRequest.part``), each part whole
    in one domain of this level and no two parts in one domain, still all or nothing
    (``placement/parts.py``): a JobSet with an exclusive topology."""
    parts_share: bool = False
    """Parts may share a domain of ``part_level`` (an upstream composite group's children:
    the API asks each child to be colocated, not the children to be apart)."""
    whole_level: str = ""
    """With ``part_level``: every part within one domain of this level too (a composite
    group's own constraint, e.g. each child under one leaf, the whole under one spine)."""

    key: str = field(init=False, repr=False, compare=False)

    def __post_init__(self) -> None:
        if self.min_member < 0:
            raise ValueError(f"gang {self.name}: min_member must be >= 0")
        uids = [p.uid for p in self.members]
        if len(set(uids)) != len(uids):
            raise ValueError(f"gang {self.name}: duplicate member uids")
        object.__setattr__(self, "members", tuple(self.members))
        object.__setattr__(self, "key", f"{self.namespace}/{self.name}")

    @property
    def required_members(self) -> int:
        return self.min_member or len(self.members)

    @property
    def grows(self) -> bool:
        """An elastic gang already running (at least its minimum placed): what it asks
        for now is optional, so it waits behind every gang that is not running yet, never
        preempts and never reserves."""
        return self.elastic and self.placed > 0

    def topology_for(self, pods: int) -> TopologyConstraint:
        """The constraint for placing ``pods`` members now (``placed`` + ``pods`` in all)."""
        size = self.placed + pods
        for limit, constraint in self.size_rules:
            if limit is None or size <= limit:
                return constraint
        return self.topology if not self.size_rules else TopologyConstraint()

    def sized(self, pods: int) -> Gang:
        """The rigid gang of this gang's first ``pods`` members, with the topology for
        that size: what one elastic placement attempt asks for."""
        return dataclasses.replace(self, members=self.members[:pods], min_member=0,
                                   elastic=False, size_rules=(),
                                   topology=self.topology_for(pods))

    @classmethod
    def of_pod(cls, pod: PodRequest) -> Gang:
        """A gang of one, for a pod that belongs to no gang."""
        return cls(
            name=pod.name,
            namespace=pod.namespace,
            members=(pod,),
            priority=pod.priority,
            creation_timestamp=pod.creation_timestamp,
            topology=TopologyConstraint(NODE_LEVEL, TopologyMode.REQUIRED),
        )
