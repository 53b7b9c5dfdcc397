"""The cluster state's value types and small helpers (shared by its index modules)."""

from __future__ import annotations

import enum
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field

from ..framework.interface import LiveDomain as LiveDomain  # the read contract, re-exported
from ..framework.model import NodeInfo, PodRequest

ELIGIBILITY_CACHE_SIZE = 4096
HoldingKey = tuple[int, tuple[tuple[str, int], ...]]
POD_KEY_MEMO_SIZE = 65536




class PodState(enum.StrEnum):
    ASSUMED = "Assumed"
    BOUND = "Bound"


class OvercommitError(ValueError):
    """``assume`` would push a node's usage of some resource past its allocatable."""


@dataclass(frozen=True, slots=True)
class DomainView:
    """A switch domain (or the cluster) as exposed to callers."""

    level: str
    name: str
    nodes: tuple[str, ...]
    free: Mapping[str, int]
    """Free allocatable summed over the domain's schedulable (uncordoned) nodes."""
    capacity: Mapping[str, int]
    """Allocatable minus untracked usage, summed over schedulable nodes."""


@dataclass(frozen=True, slots=True)
class NodeColumns:
    """Per-node state by index (see the module doc), read-only and live: ``free[i]`` is
    node i's free allocatable now. Valid until the next node change."""

    nodes: Sequence[NodeInfo]
    allocatable: Sequence[Mapping[str, int]]
    requested: Sequence[Mapping[str, int]]
    """Untracked usage plus assumed and bound pods."""
    free: Sequence[Mapping[str, int]]
    """``allocatable - requested`` (negative if overcommitted through ``add_bound``)."""
    capacity: Sequence[Mapping[str, int]]
    """Free allocatable if every tracked pod left: for can-this-ever-fit questions."""
    schedulable: Sequence[bool]
    """False for cordoned nodes."""


@dataclass(frozen=True, slots=True)
class Eligibility:
    """Static filter result for one pod key: ``mask[i]`` is 1 if node i passes every
    filter, else ``reasons[i]`` says why not."""

    mask: bytes
    reasons: tuple[str | None, ...]


@dataclass(slots=True)
class Domain:
    level: str
    rank: int
    name: str
    nodes: tuple[int, ...]
    path: tuple[str, ...] = ()
    free: dict[str, int] = field(default_factory=dict)
    capacity: dict[str, int] = field(default_factory=dict)


def domain_path(dom: Domain) -> tuple[str, ...]:
    return dom.path


def node_name(node: NodeInfo) -> str:
    return node.name


@dataclass(slots=True)
class PodEntry:
    pod: PodRequest
    node: int
    state: PodState


def add_into(target: dict[str, int], delta: Mapping[str, int], sign: int) -> None:
    for resource, qty in delta.items():
        target[resource] = target.get(resource, 0) + sign * qty


def drop_zeros(target: dict[str, int], keys: Iterable[str]) -> None:
    for resource in keys:
        if target.get(resource) == 0:
            del target[resource]


def capacity_of(node: NodeInfo) -> dict[str, int]:
    return {r: max(q - node.requested.get(r, 0), 0) for r, q in node.allocatable.items()}
