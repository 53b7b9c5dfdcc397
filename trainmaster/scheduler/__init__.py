"""trainmaster-scheduler placement core: a topology-aware gang scheduler, API-free.

Pure Python, no Kubernetes imports. Modelled on kube-scheduler's framework (extension
points, one ``Status`` type, a plugin ``REGISTRY``) and scheduler-plugins' coscheduling
(a ``GangManager`` with its own ``GangState``, mapped to ``Status`` by a thin plugin).

Typical use::

    snap = ClusterSnapshot(nodes, levels=("spine", "leaf"))
    result = place_gang(snap, gang)           # Placement | Unschedulable, no mutation
    sched = GangScheduler(snap, clock=clock)  # queue + reserve/permit + anti-starvation
    sched.submit(gang); cycle = sched.run_cycle()

The runtime against a real API server (informers, binder, leader election, metrics; see
docs/scheduler.md) is exported here too but imported lazily, so that the core stays
free of Kubernetes imports for whoever only places gangs::

    api = await trainmaster.kubeclient.Kube.connect(kubeconfig, qps=500)
    runtime = SchedulerRuntime(api, SchedulerConfig.load(path))
    await runtime.start(); await runtime.run(stop)
"""

from typing import TYPE_CHECKING, Any

from ._blocked import BlockedNodes
from ._contracts import (
    FilterPlugin,
    PermitPlugin,
    Plugin,
    PreFilterPlugin,
    ReservePlugin,
    ScorePlugin,
)
from ._coscheduling import Coscheduling, GangManager, GangState
from ._filters import (
    NodeAffinity,
    NodeResourcesFit,
    NodeSelector,
    NodeUnschedulable,
    TaintToleration,
    filter_key,
    fit_count,
    insufficient_resource,
    matches_affinity,
    matches_node_selector,
    matches_requirement,
    untolerated_taint,
)
from ._fragmentation import FragmentationReport, fragmentation_report
from ._framework import (
    BUILTIN,
    DEFAULT_FILTERS,
    DEFAULT_PLUGINS,
    DEFAULT_SCORER,
    REGISTRY,
    Handle,
    PluginFactory,
    Profile,
    Registry,
    contract_errors,
)
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
    Placer,
    ReservationTarget,
    Unschedulable,
    place_gang,
    reservation_target,
)
from ._preemption import (
    Preemption,
    Victim,
    evictable,
    nominate_victims,
    priced,
    select_victims,
    set_cost,
    victim_cost,
    work_lost,
)
from ._queue import (
    Admission,
    Clock,
    CycleResult,
    GangQueue,
    GangScheduler,
    Reservation,
    queue_key,
)
from ._quota import DEFAULT_QUEUE, QueueLedger, QueueSpec, QueueUsage, gang_gpus
from ._score import BestFit, best_fit_score, primary_resource
from ._snapshot import (
    ClusterSnapshot,
    DomainView,
    Eligibility,
    LiveDomain,
    NodeColumns,
    OvercommitError,
    PodState,
)
from ._status import Code, Status

if TYPE_CHECKING:
    from ._binder import Binder, BindResult, GangOutcome
    from ._cache import ClusterCache
    from ._config import ConfigError, LeaderElection, SchedulerConfig, TopologyRule
    from ._convert import (
        PodGroupInfo,
        PodInfo,
        node_info,
        pod_group_info,
        pod_info,
        pod_requests,
        resource_map,
    )
    from ._keys import (
        POD_GROUP_LABEL,
        TOPOLOGY_DOMAIN_ANNOTATION,
        TOPOLOGY_MODE_ANNOTATION,
        topology_label,
    )
    from ._leader import LeaderElector, Renewal
    from ._loop import SchedulerRuntime
    from ._metrics import SchedulerMetrics
    from ._service import ServiceOptions, serve

_RUNTIME = {
    "POD_GROUP_LABEL": "_keys",
    "TOPOLOGY_DOMAIN_ANNOTATION": "_keys",
    "TOPOLOGY_MODE_ANNOTATION": "_keys",
    "Binder": "_binder",
    "BindResult": "_binder",
    "ClusterCache": "_cache",
    "ConfigError": "_config",
    "GangOutcome": "_binder",
    "LeaderElection": "_config",
    "LeaderElector": "_leader",
    "PodGroupInfo": "_convert",
    "PodInfo": "_convert",
    "Renewal": "_leader",
    "SchedulerConfig": "_config",
    "SchedulerMetrics": "_metrics",
    "SchedulerRuntime": "_loop",
    "ServiceOptions": "_service",
    "TopologyRule": "_config",
    "node_info": "_convert",
    "pod_group_info": "_convert",
    "pod_info": "_convert",
    "pod_requests": "_convert",
    "resource_map": "_convert",
    "serve": "_service",
    "topology_label": "_keys",
}


def __getattr__(name: str) -> Any:
    """Runtime names on first use (PEP 562): importing the core stays API-free."""
    module = _RUNTIME.get(name)
    if module is None:
        raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
    import importlib

    value = getattr(importlib.import_module(f"{__name__}.{module}"), name)
    globals()[name] = value
    return value


__all__ = [
    "BUILTIN",
    "CLUSTER_LEVEL",
    "CPU",
    "DEFAULT_FILTERS",
    "DEFAULT_PLUGINS",
    "DEFAULT_QUEUE",
    "DEFAULT_SCORER",
    "GPU",
    "MEMORY",
    "NODE_LEVEL",
    "PODS",
    "POD_GROUP_LABEL",
    "REGISTRY",
    "TOPOLOGY_DOMAIN_ANNOTATION",
    "TOPOLOGY_MODE_ANNOTATION",
    "Admission",
    "BestFit",
    "BindResult",
    "Binder",
    "Binding",
    "BlockedNodes",
    "Clock",
    "ClusterCache",
    "ClusterSnapshot",
    "Code",
    "ConfigError",
    "Coscheduling",
    "CycleResult",
    "DomainView",
    "Eligibility",
    "FilterPlugin",
    "FragmentationReport",
    "Gang",
    "GangManager",
    "GangOutcome",
    "GangQueue",
    "GangScheduler",
    "GangState",
    "Handle",
    "LeaderElection",
    "LeaderElector",
    "LiveDomain",
    "NodeAffinity",
    "NodeColumns",
    "NodeInfo",
    "NodeResourcesFit",
    "NodeSelector",
    "NodeSelectorRequirement",
    "NodeUnschedulable",
    "OvercommitError",
    "PermitPlugin",
    "Placement",
    "Placer",
    "Plugin",
    "PluginFactory",
    "PodGroupInfo",
    "PodInfo",
    "PodRequest",
    "PodState",
    "PreFilterPlugin",
    "Preemption",
    "Profile",
    "QueueLedger",
    "QueueSpec",
    "QueueUsage",
    "Registry",
    "Renewal",
    "Reservation",
    "ReservationTarget",
    "ReservePlugin",
    "SchedulerConfig",
    "SchedulerMetrics",
    "SchedulerRuntime",
    "ScorePlugin",
    "SelectorOperator",
    "ServiceOptions",
    "Status",
    "Taint",
    "TaintEffect",
    "TaintToleration",
    "Toleration",
    "TolerationOperator",
    "TopologyConstraint",
    "TopologyMode",
    "TopologyRule",
    "Unschedulable",
    "Victim",
    "best_fit_score",
    "contract_errors",
    "evictable",
    "filter_key",
    "fit_count",
    "fragmentation_report",
    "gang_gpus",
    "insufficient_resource",
    "matches_affinity",
    "matches_node_selector",
    "matches_requirement",
    "node_info",
    "nominate_victims",
    "place_gang",
    "pod_group_info",
    "pod_info",
    "pod_requests",
    "priced",
    "primary_resource",
    "queue_key",
    "reservation_target",
    "resource_map",
    "select_victims",
    "serve",
    "set_cost",
    "topology_label",
    "untolerated_taint",
    "victim_cost",
    "work_lost",
]
