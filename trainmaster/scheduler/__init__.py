"""trainmaster-scheduler placement core: a topology-aware gang scheduler, API-free.

Pure Python, no Kubernetes imports. Modelled on kube-scheduler's framework (extension
points, one ``Status`` type, a plugin ``REGISTRY``) and scheduler-plugins' coscheduling
(a ``GangManager`` with its own ``GangState``, mapped to ``Status`` by a thin plugin).

Typical use::

    snap = ClusterSnapshot(nodes, levels=("spine", "leaf"))
    result = place_gang(snap, gang)           # Placement | Unschedulable, no mutation
    sched = GangScheduler(snap, clock=clock)  # queue + reserve/permit + anti-starvation
    sched.submit(gang); cycle = sched.run_cycle()
"""

from ._filters import (
    NodeAffinity,
    NodeResourcesFit,
    NodeSelector,
    NodeUnschedulable,
    TaintToleration,
    fit_count,
    insufficient_resource,
    matches_affinity,
    matches_node_selector,
    matches_requirement,
    untolerated_taint,
)
from ._fragmentation import FragmentationReport, fragmentation_report
from ._framework import (
    DEFAULT_FILTERS,
    DEFAULT_PLUGINS,
    DEFAULT_SCORER,
    REGISTRY,
    FilterPlugin,
    Handle,
    PermitPlugin,
    PluginFactory,
    PreFilterPlugin,
    Profile,
    ReservePlugin,
    ScorePlugin,
)
from ._gang import Coscheduling, GangManager, GangState
from ._model import (
    CLUSTER_LEVEL,
    CPU,
    GPU,
    MEMORY,
    NODE_LEVEL,
    PODS,
    Gang,
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
from ._placement import (
    Binding,
    Placement,
    ReservationTarget,
    Unschedulable,
    place_gang,
    reservation_target,
)
from ._queue import Clock, CycleResult, GangQueue, GangScheduler, Reservation, queue_key
from ._score import BestFit, best_fit_score, primary_resource
from ._snapshot import ClusterSnapshot, DomainView, OvercommitError, PodState
from ._status import Code, Status

__all__ = [
    "CLUSTER_LEVEL",
    "CPU",
    "DEFAULT_FILTERS",
    "DEFAULT_PLUGINS",
    "DEFAULT_SCORER",
    "GPU",
    "MEMORY",
    "NODE_LEVEL",
    "PODS",
    "REGISTRY",
    "BestFit",
    "Binding",
    "Clock",
    "ClusterSnapshot",
    "Code",
    "Coscheduling",
    "CycleResult",
    "DomainView",
    "FilterPlugin",
    "FragmentationReport",
    "Gang",
    "GangManager",
    "GangQueue",
    "GangScheduler",
    "GangState",
    "Handle",
    "NodeAffinity",
    "NodeInfo",
    "NodeResourcesFit",
    "NodeSelector",
    "NodeSelectorRequirement",
    "NodeUnschedulable",
    "OvercommitError",
    "PermitPlugin",
    "Placement",
    "PluginFactory",
    "PodRequest",
    "PodState",
    "PreFilterPlugin",
    "Profile",
    "Reservation",
    "ReservationTarget",
    "ReservePlugin",
    "ScorePlugin",
    "SelectorOperator",
    "Status",
    "Taint",
    "TaintEffect",
    "TaintToleration",
    "Toleration",
    "TolerationOperator",
    "TopologyConstraint",
    "TopologyMode",
    "Unschedulable",
    "best_fit_score",
    "fit_count",
    "fragmentation_report",
    "insufficient_resource",
    "matches_affinity",
    "matches_node_selector",
    "matches_requirement",
    "place_gang",
    "primary_resource",
    "queue_key",
    "reservation_target",
    "untolerated_taint",
]
