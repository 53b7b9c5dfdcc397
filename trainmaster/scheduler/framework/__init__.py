"""Contracts only: value types, the one ``Status``, ``CycleState``, the extension points,
the plugin registry and profiles. Imports nothing of ``plugins``, ``state``,
``placement`` or ``runtime`` (``tests/scheduler/test_layering.py``)."""

from .gangs import GangManager, GangState
from .interface import (
    Admission,
    CycleState,
    DomainChoicePlugin,
    FilterPlugin,
    IndexedFilter,
    LiveDomain,
    NodeIndex,
    PermitPlugin,
    Plugin,
    PostFilterPlugin,
    PreFilterPlugin,
    PreScorePlugin,
    ReservePlugin,
    ScorePlugin,
    filter_key,
)
from .registry import Handle, PluginFactory, Profile, Registry, contract_errors
from .results import Binding, Placement, Unschedulable
from .scoring import Scoring
from .status import Code, Status

__all__ = [
    "Admission",
    "Binding",
    "Code",
    "CycleState",
    "DomainChoicePlugin",
    "FilterPlugin",
    "GangManager",
    "GangState",
    "Handle",
    "IndexedFilter",
    "LiveDomain",
    "NodeIndex",
    "PermitPlugin",
    "Placement",
    "Plugin",
    "PluginFactory",
    "PostFilterPlugin",
    "PreFilterPlugin",
    "PreScorePlugin",
    "Profile",
    "Registry",
    "ReservePlugin",
    "ScorePlugin",
    "Scoring",
    "Status",
    "Unschedulable",
    "contract_errors",
    "filter_key",
]
