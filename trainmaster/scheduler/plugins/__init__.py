"""The built-in plugins, one module each, and their registration lines.

Adding a plugin is one module here plus one ``REGISTRY.register(...)`` line below; it
joins the default profile in registration order (``DEFAULT_PLUGINS``) unless left out
there. ``framework/registry.py`` checks each against the contracts it implements.
"""

from __future__ import annotations

from ..framework.gangs import GangManager
from ..framework.interface import FilterPlugin
from ..framework.registry import Handle, Profile, Registry
from ..framework.scoring import Scoring
from ..state import ClusterState
from .best_fit import BestFit
from .coscheduling import Coscheduling
from .dataset_locality import DatasetLocality
from .node_affinity import NodeAffinity
from .node_selector import NodeSelector
from .node_unschedulable import NodeUnschedulable
from .resources_fit import NodeResourcesFit
from .taint_toleration import TaintToleration
from .topology import TightestDomain

REGISTRY = Registry()
REGISTRY.register(NodeUnschedulable)
REGISTRY.register(NodeSelector)
REGISTRY.register(NodeAffinity)
REGISTRY.register(TaintToleration)
REGISTRY.register(NodeResourcesFit)
REGISTRY.register(TightestDomain)
REGISTRY.register(BestFit)
REGISTRY.register(Coscheduling, lambda handle: Coscheduling(handle.gangs))
REGISTRY.register(DatasetLocality)

DEFAULT_PLUGINS: tuple[str, ...] = tuple(REGISTRY)


def default_profile(handle: Handle) -> Profile:
    return Profile.build(handle, DEFAULT_PLUGINS, REGISTRY)


# Static filters and score plugins read no cluster state, so an empty one serves.
_DEFAULT = default_profile(Handle(ClusterState(()), GangManager(lambda gang_key: 0)))
DEFAULT_FILTERS: tuple[FilterPlugin, ...] = _DEFAULT.filters
"""The default profile's filters (for ``place_gang`` and ``plan_batch`` without one)."""
DEFAULT_SCORER: Scoring = _DEFAULT.scorer
"""The default profile's score stage: BestFit + DatasetLocality, the tightest domain."""

__all__ = [
    "DEFAULT_FILTERS",
    "DEFAULT_PLUGINS",
    "DEFAULT_SCORER",
    "REGISTRY",
    "BestFit",
    "Coscheduling",
    "DatasetLocality",
    "NodeAffinity",
    "NodeResourcesFit",
    "NodeSelector",
    "NodeUnschedulable",
    "TaintToleration",
    "TightestDomain",
    "default_profile",
]
