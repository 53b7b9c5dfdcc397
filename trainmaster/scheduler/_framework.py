"""Extension points, the plugin registry and profiles (kube-scheduler framework style).

Extension points, in the order the runtime (``GangScheduler``) calls them for a gang:

* pre-filter: once per gang (its first pod); non-success skips the gang this cycle.
* filter: per pod signature and node. Only ``STATIC`` filters may be configured; they
  are evaluated once per snapshot and cached. Resource fit is built into the
  placement core's capacity accounting (same pure function as ``NodeResourcesFit``).
* score: orders the nodes inside a domain; higher is better, ties by node name.
* reserve: the runtime assumes every pod in the snapshot, then calls reserve plugins;
  any failure unreserves (reverse order) and forgets the whole gang.
* permit: per pod after reserve; anything but SUCCESS/SKIP unreserves the whole gang.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from typing import ClassVar, Protocol, runtime_checkable

from ._filters import (
    NodeAffinity,
    NodeResourcesFit,
    NodeSelector,
    NodeUnschedulable,
    TaintToleration,
)
from ._gang import Coscheduling, GangManager
from ._model import NodeInfo, PodRequest
from ._score import BestFit
from ._snapshot import ClusterSnapshot
from ._status import Status


@runtime_checkable
class PreFilterPlugin(Protocol):
    NAME: ClassVar[str]

    def pre_filter(self, pod: PodRequest) -> Status: ...


@runtime_checkable
class FilterPlugin(Protocol):
    NAME: ClassVar[str]
    STATIC: ClassVar[bool]

    def filter(self, pod: PodRequest, node: NodeInfo, requested: Mapping[str, int]) -> Status: ...


@runtime_checkable
class ScorePlugin(Protocol):
    NAME: ClassVar[str]

    def score(
        self, requests: Mapping[str, int], free: Mapping[str, int], allocatable: Mapping[str, int]
    ) -> int: ...


@runtime_checkable
class ReservePlugin(Protocol):
    NAME: ClassVar[str]

    def reserve(self, pod: PodRequest, node: str) -> Status: ...

    def unreserve(self, pod: PodRequest, node: str) -> None: ...


@runtime_checkable
class PermitPlugin(Protocol):
    NAME: ClassVar[str]

    def permit(self, pod: PodRequest, node: str) -> Status: ...


@dataclass(frozen=True, slots=True)
class Handle:
    """What a plugin factory may use."""

    snapshot: ClusterSnapshot
    gangs: GangManager


PluginFactory = Callable[[Handle], object]

REGISTRY: Mapping[str, PluginFactory] = {
    NodeUnschedulable.NAME: lambda h: NodeUnschedulable(),
    NodeSelector.NAME: lambda h: NodeSelector(),
    NodeAffinity.NAME: lambda h: NodeAffinity(),
    TaintToleration.NAME: lambda h: TaintToleration(),
    NodeResourcesFit.NAME: lambda h: NodeResourcesFit(),
    BestFit.NAME: lambda h: BestFit(),
    Coscheduling.NAME: lambda h: Coscheduling(h.gangs),
}

DEFAULT_FILTERS: tuple[FilterPlugin, ...] = (
    NodeUnschedulable(),
    NodeSelector(),
    NodeAffinity(),
    TaintToleration(),
)
DEFAULT_SCORER: ScorePlugin = BestFit()
DEFAULT_PLUGINS: tuple[str, ...] = (
    NodeUnschedulable.NAME,
    NodeSelector.NAME,
    NodeAffinity.NAME,
    TaintToleration.NAME,
    NodeResourcesFit.NAME,
    BestFit.NAME,
    Coscheduling.NAME,
)


@dataclass(frozen=True, slots=True)
class Profile:
    """Plugins per extension point, in call order."""

    pre_filters: tuple[PreFilterPlugin, ...] = ()
    filters: tuple[FilterPlugin, ...] = DEFAULT_FILTERS
    scorer: ScorePlugin = DEFAULT_SCORER
    reserves: tuple[ReservePlugin, ...] = ()
    permits: tuple[PermitPlugin, ...] = ()

    @classmethod
    def build(
        cls,
        handle: Handle,
        names: Sequence[str] = DEFAULT_PLUGINS,
        registry: Mapping[str, PluginFactory] = REGISTRY,
    ) -> Profile:
        """Instantiate ``names`` from ``registry`` and slot each plugin into every extension
        point it implements. Dynamic filters other than ``NodeResourcesFit`` (built in)
        are rejected; at most one score plugin."""
        pre: list[PreFilterPlugin] = []
        filters: list[FilterPlugin] = []
        scorers: list[ScorePlugin] = []
        reserves: list[ReservePlugin] = []
        permits: list[PermitPlugin] = []
        for name in names:
            if name not in registry:
                raise ValueError(f"unknown plugin {name!r}; registered: {sorted(registry)}")
            plugin = registry[name](handle)
            if isinstance(plugin, PreFilterPlugin):
                pre.append(plugin)
            if isinstance(plugin, FilterPlugin):
                if plugin.STATIC:
                    filters.append(plugin)
                elif name != NodeResourcesFit.NAME:
                    raise ValueError(f"filter {name!r} is not STATIC; only static filters")
            if isinstance(plugin, ScorePlugin):
                scorers.append(plugin)
            if isinstance(plugin, ReservePlugin):
                reserves.append(plugin)
            if isinstance(plugin, PermitPlugin):
                permits.append(plugin)
        if len(scorers) > 1:
            raise ValueError(f"at most one score plugin, got {[s.NAME for s in scorers]}")
        return cls(
            tuple(pre),
            tuple(filters),
            scorers[0] if scorers else DEFAULT_SCORER,
            tuple(reserves),
            tuple(permits),
        )
