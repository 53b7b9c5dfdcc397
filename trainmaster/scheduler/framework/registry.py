"""The plugin registry and profiles (kube-scheduler's ``Registry`` and profile).

The contracts are in ``interface.py``; the built-in plugins and their registration
lines are in ``plugins/__init__.py`` (``REGISTRY``). ``register`` and ``Profile.build``
refuse a plugin that implements part of a contract, for example a filter without
``cache_key``: the cluster state caches filter answers per key, and a filter it could
not key would silently share stale answers between pods.
"""

from __future__ import annotations

from collections.abc import Callable, Iterator, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Protocol

from .gangs import GangManager
from .interface import (
    DomainChoicePlugin,
    FilterPlugin,
    PermitPlugin,
    PreFilterPlugin,
    PreScorePlugin,
    ReservePlugin,
    ScorePlugin,
)
from .model import NodeInfo
from .scoring import Scoring

RESOURCE_FIT = "NodeResourcesFit"
"""The one plugin the placement applies itself (through its capacity accounting): a
profile may name it; it fills no extension point."""
BUILTIN: frozenset[str] = frozenset({RESOURCE_FIT})


class StateReader(Protocol):
    """What a plugin factory may read of the cluster state."""

    def placed_members(self, gang_key: str) -> int: ...

    def node(self, name: str) -> NodeInfo: ...


@dataclass(frozen=True, slots=True)
class Handle:
    """What a plugin factory may use."""

    snapshot: StateReader
    gangs: GangManager


PluginFactory = Callable[[Handle], object]

# (method that marks the extension point, every member its contract requires)
_CONTRACTS: tuple[tuple[str, type, tuple[str, ...]], ...] = (
    ("pre_filter", PreFilterPlugin, ("NAME", "pre_filter")),
    ("filter", FilterPlugin, ("NAME", "STATIC", "applies", "cache_key", "filter")),
    ("pre_score", PreScorePlugin, ("NAME", "pre_score", "score")),
    ("score", ScorePlugin, ("NAME", "score")),
    ("order_domains", DomainChoicePlugin, ("NAME", "order_domains")),
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


@dataclass(frozen=True, slots=True)
class Profile:
    """Plugins per extension point, in call order; ``scorer`` is the whole score stage
    (every score plugin with its weight, and the domain choice)."""

    pre_filters: tuple[PreFilterPlugin, ...] = ()
    filters: tuple[FilterPlugin, ...] = ()
    scorer: Scoring = field(default_factory=lambda: Scoring(()))
    reserves: tuple[ReservePlugin, ...] = ()
    permits: tuple[PermitPlugin, ...] = ()

    @classmethod
    def build(
        cls,
        handle: Handle,
        names: Sequence[str],
        registry: Mapping[str, PluginFactory],
        weights: Mapping[str, int] | None = None,
    ) -> Profile:
        """Instantiate ``names`` from ``registry`` and slot each plugin into every extension
        point it implements. Plugins that fall short of a contract (see
        ``contract_errors``) and non-static filters are rejected. Score plugins get
        ``weights[name]`` (default 1); at most one domain choice (default: the tightest
        domain first)."""
        pre: list[PreFilterPlugin] = []
        filters: list[FilterPlugin] = []
        scorers: list[tuple[ScorePlugin, int]] = []
        domain_choices: list[DomainChoicePlugin] = []
        reserves: list[ReservePlugin] = []
        permits: list[PermitPlugin] = []
        weights = weights or {}
        if len(set(names)) != len(names):
            raise ValueError(f"a plugin is named twice: {list(names)}")
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
                scorers.append((plugin, weights.get(name, 1)))
            if isinstance(plugin, DomainChoicePlugin):
                domain_choices.append(plugin)
            if isinstance(plugin, ReservePlugin):
                reserves.append(plugin)
            if isinstance(plugin, PermitPlugin):
                permits.append(plugin)
        if len(domain_choices) > 1:
            raise ValueError(
                f"at most one domain choice plugin, got {[d.NAME for d in domain_choices]}")
        return cls(
            tuple(pre),
            tuple(filters),
            Scoring(scorers, domain_choices[0] if domain_choices else None),
            tuple(reserves),
            tuple(permits),
        )
