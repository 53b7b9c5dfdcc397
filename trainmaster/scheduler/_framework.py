"""The plugin registry and profiles (kube-scheduler's ``Registry`` and profile).

The contracts are in ``_contracts.py``. Adding a plugin is one line here,
``REGISTRY.register(Type)`` (or with a factory that takes the ``Handle``); it joins the
default profile in registration order. ``register`` and ``Profile.build`` refuse a
plugin that implements part of a contract, for example a filter without ``cache_key``:
the snapshot caches filter answers per key, and a filter it could not key would silently
share stale answers between pods.
"""

from __future__ import annotations

from collections.abc import Callable, Iterator, Mapping, Sequence
from dataclasses import dataclass

from ._contracts import (
    FilterPlugin,
    PermitPlugin,
    PreFilterPlugin,
    ReservePlugin,
    ScorePlugin,
)
from ._coscheduling import Coscheduling, GangManager
from ._dataset_locality import DatasetLocality
from ._filters import (
    NodeAffinity,
    NodeResourcesFit,
    NodeSelector,
    NodeUnschedulable,
    TaintToleration,
)
from ._score import BestFit
from ._snapshot import ClusterSnapshot


@dataclass(frozen=True, slots=True)
class Handle:
    """What a plugin factory may use."""

    snapshot: ClusterSnapshot
    gangs: GangManager


PluginFactory = Callable[[Handle], object]

BUILTIN: frozenset[str] = frozenset({NodeResourcesFit.NAME})
"""Plugins the placement core applies itself (resource fit, through its capacity
accounting): a profile may name them; they fill no extension point."""

# (method that marks the extension point, every member its contract requires)
_CONTRACTS: tuple[tuple[str, type, tuple[str, ...]], ...] = (
    ("pre_filter", PreFilterPlugin, ("NAME", "pre_filter")),
    ("filter", FilterPlugin, ("NAME", "STATIC", "applies", "cache_key", "filter")),
    ("score", ScorePlugin, ("NAME", "score")),
    ("reserve", ReservePlugin, ("NAME", "reserve", "unreserve")),
    ("permit", PermitPlugin, ("NAME", "permit")),
)


def contract_errors(name: str, plugin: object) -> list[str]:
    """What ``plugin`` (a class or an instance) lacks for the extension points it
    implements; empty if it conforms."""
    if name in BUILTIN:
        return []
    problems: list[str] = []
    for marker, protocol, members in _CONTRACTS:
        if not hasattr(plugin, marker):
            continue
        missing = [m for m in members if not hasattr(plugin, m)]
        if missing:
            problems.append(
                f"plugin {name!r} has {marker}() but no {', '.join(missing)} "
                f"(required by {protocol.__name__})"
            )
        elif protocol is FilterPlugin and getattr(plugin, "STATIC") is not True:  # noqa: B009
            problems.append(
                f"filter {name!r} is not STATIC; only static filters can be configured "
                f"(resource fit is built in)"
            )
    return problems


class Registry(Mapping[str, PluginFactory]):
    """Plugin name -> factory, in registration order."""

    def __init__(self) -> None:
        self._factories: dict[str, PluginFactory] = {}

    def register(self, plugin: type[object], factory: PluginFactory | None = None) -> None:
        """Add ``plugin`` under its ``NAME``; ``factory`` defaults to calling the class
        with no arguments. Raises ``ValueError`` if the name is taken or the class does
        not meet the contracts of the extension points it implements."""
        name = getattr(plugin, "NAME", None)
        if not isinstance(name, str) or not name:
            raise ValueError(f"plugin class {plugin.__name__} has no NAME")
        if name in self._factories:
            raise ValueError(f"plugin {name!r} is already registered")
        problems = contract_errors(name, plugin)
        if problems:
            raise ValueError("; ".join(problems))
        self._factories[name] = factory or (lambda handle: plugin())

    def __getitem__(self, name: str) -> PluginFactory:
        return self._factories[name]

    def __iter__(self) -> Iterator[str]:
        return iter(self._factories)

    def __len__(self) -> int:
        return len(self._factories)


REGISTRY = Registry()
REGISTRY.register(NodeUnschedulable)
REGISTRY.register(NodeSelector)
REGISTRY.register(NodeAffinity)
REGISTRY.register(TaintToleration)
REGISTRY.register(NodeResourcesFit)
REGISTRY.register(BestFit)
REGISTRY.register(Coscheduling, lambda handle: Coscheduling(handle.gangs))
REGISTRY.register(DatasetLocality)

# One score plugin per profile: DatasetLocality is BestFit plus dataset locality.
DEFAULT_PLUGINS: tuple[str, ...] = tuple(n for n in REGISTRY if n != BestFit.NAME)
DEFAULT_SCORER: ScorePlugin = BestFit()


@dataclass(frozen=True, slots=True)
class Profile:
    """Plugins per extension point, in call order."""

    pre_filters: tuple[PreFilterPlugin, ...] = ()
    filters: tuple[FilterPlugin, ...] = ()
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
        point it implements. Plugins that fall short of a contract (see
        ``contract_errors``) and non-static filters are rejected; at most one score
        plugin."""
        pre: list[PreFilterPlugin] = []
        filters: list[FilterPlugin] = []
        scorers: list[ScorePlugin] = []
        reserves: list[ReservePlugin] = []
        permits: list[PermitPlugin] = []
        for name in names:
            if name not in registry:
                raise ValueError(f"unknown plugin {name!r}; registered: {sorted(registry)}")
            plugin = registry[name](handle)
            if name in BUILTIN:
                continue
            problems = contract_errors(name, plugin)
            if problems:
                raise ValueError("; ".join(problems))
            if isinstance(plugin, PreFilterPlugin):
                pre.append(plugin)
            if isinstance(plugin, FilterPlugin):
                filters.append(plugin)
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


def _default_filters() -> tuple[FilterPlugin, ...]:
    # Static filters read no snapshot, so an empty one serves.
    handle = Handle(ClusterSnapshot(()), GangManager(lambda gang_key: 0))
    return Profile.build(handle).filters


DEFAULT_FILTERS: tuple[FilterPlugin, ...] = _default_filters()
"""The default profile's filters (for ``place_gang`` and ``plan_batch`` without one)."""
