"""Extension-point contracts: what a plugin must provide (protocols only, no registry).

Modelled on kube-scheduler's ``framework/interface.go``: one protocol per extension point,
each with the plugin's ``NAME``. The runtime (``GangScheduler``) calls them for a gang in
this order:

* pre-filter: once per gang (its first pod); non-success skips the gang this cycle.
* filter: per pod and node. Filters are *static*: they read only the pod spec and the
  node spec, never usage, so the snapshot evaluates each once per (cache key, node) and
  caches the answer until the next node change. Resource fit is not a filter plugin: the
  placement core's capacity accounting applies it (``NodeResourcesFit`` is its name).
* score: orders the nodes inside a domain; higher is better, ties by node name.
* reserve: the runtime assumes every pod in the snapshot, then calls reserve plugins;
  any failure unreserves (reverse order) and forgets the whole gang.
* permit: per pod after reserve; anything but SUCCESS/SKIP unreserves the whole gang.

Which ``Code`` means what to the runtime is documented on ``Code`` (``_status.py``).
"""

from __future__ import annotations

from collections.abc import Hashable, Mapping
from typing import ClassVar, Protocol, runtime_checkable

from ._model import NodeInfo, PodRequest
from ._status import Status


@runtime_checkable
class Plugin(Protocol):
    NAME: ClassVar[str]


@runtime_checkable
class PreFilterPlugin(Plugin, Protocol):
    def pre_filter(self, pod: PodRequest) -> Status: ...


@runtime_checkable
class FilterPlugin(Plugin, Protocol):
    """A static node filter. Its cache key is part of the contract because the snapshot
    caches answers per key: two pods with equal keys must get the same answer on every
    node, so the key must cover every pod field ``filter`` reads."""

    STATIC: ClassVar[bool]
    """Must be True: the answer depends on the pod spec and node spec only."""

    def applies(self, pod: PodRequest) -> bool:
        """False only if ``filter`` passes every node for ``pod`` (the snapshot skips it)."""
        ...

    def cache_key(self, pod: PodRequest) -> Hashable:
        """Everything in ``pod`` that ``filter`` reads (``None`` if it reads nothing)."""
        ...

    def filter(self, pod: PodRequest, node: NodeInfo) -> Status: ...


@runtime_checkable
class ScorePlugin(Plugin, Protocol):
    def score(
        self, requests: Mapping[str, int], free: Mapping[str, int], allocatable: Mapping[str, int]
    ) -> int: ...


@runtime_checkable
class ReservePlugin(Plugin, Protocol):
    def reserve(self, pod: PodRequest, node: str) -> Status: ...

    def unreserve(self, pod: PodRequest, node: str) -> None:
        """Undo ``reserve``; must be idempotent."""
        ...


@runtime_checkable
class PermitPlugin(Plugin, Protocol):
    def permit(self, pod: PodRequest, node: str) -> Status: ...

