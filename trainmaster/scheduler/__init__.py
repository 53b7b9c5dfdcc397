"""trainmaster-scheduler: a topology-aware gang scheduler, built as a framework.

Layers (``docs/architecture.md``; ``tests/scheduler/test_layering.py`` enforces them):

* ``framework/``: contracts only (value types, ``Status``, ``CycleState``, the extension
  points, the registry and profiles);
* ``state/``: the cluster state the cycle places against, and its indexes;
* ``plugins/``: one module per plugin, plus one registration line each (``REGISTRY``);
* ``placement/``: the engine (one gang into the smallest domain, reservations, burst
  plans, the preemption victim search);
* ``runtime/``: the queue and ``GangScheduler`` (pure, hosted by the simulator too), and
  everything that talks to the API server (informers, binder, leader election, events,
  metrics).

Typical use::

    state = ClusterState(nodes, levels=("spine", "leaf"))
    result = place_gang(state, gang)          # Placement | Unschedulable, no mutation
    sched = GangScheduler(state, clock=clock)  # queue + reserve/permit + anti-starvation
    sched.submit(gang); cycle = sched.run_cycle()

The API-facing runtime is imported lazily, so the core stays free of Kubernetes
imports for whoever only places gangs::

    api = await trainmaster.kubeclient.Kube.connect(kubeconfig, qps=500)
    runtime = SchedulerRuntime(api, SchedulerConfig.load(path))
    await runtime.start(); await runtime.run(stop)
"""

from typing import TYPE_CHECKING, Any

from .framework import (
    Binding,
    Code,
    CycleState,
    DomainChoicePlugin,
    FilterPlugin,
    Handle,
    PermitPlugin,
    Placement,
    PreFilterPlugin,
    PreScorePlugin,
    Profile,
    Registry,
    ReservePlugin,
    ScorePlugin,
    Scoring,
    Status,
    Unschedulable,
)
from .framework.model import (
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
from .framework.resources import fit_count
from .placement.fair_victims import (
    Candidate,
    may_preempt_for_quota,
    priced_candidates,
    quota_admits,
)
from .placement.place import Placer, place_gang
from .placement.victims import nominate_victims, select_victims
from .plugins import DEFAULT_FILTERS, DEFAULT_PLUGINS, DEFAULT_SCORER, REGISTRY
from .plugins.preemption import (
    DEFAULT_RESCALE_SECONDS,
    Preemption,
    Victim,
    elastic_parts,
    priced,
    rescale_cost,
    with_shrinks,
)
from .plugins.quota import (
    DEFAULT_QUEUE,
    CohortSpec,
    FairSharing,
    QueueLedger,
    QueueSpec,
    ResourceQuota,
    cohort_specs,
    fair_sharing,
    gang_amounts,
    gang_gpus,
    queue_specs,
)
from .runtime.cycle import Cycle
from .runtime.gang_scheduler import GangScheduler
from .runtime.retry import RetryPolicy, RetryStats
from .state import BlockedNodes, ClusterState, LiveDomain

if TYPE_CHECKING:
    from ._keys import (
        POD_GROUP_LABEL,
        TOPOLOGY_DOMAIN_ANNOTATION,
        TOPOLOGY_MODE_ANNOTATION,
        topology_label,
    )
    from .runtime.config import ConfigError, SchedulerConfig
    from .runtime.convert import (
        base_units,
        node_info,
        pod_group_info,
        pod_info,
        pod_requests,
        resource_map,
    )
    from .runtime.fair_report import (
        FairReport,
        NodeFairness,
        ResourceFigures,
        charged_ledger,
        fair_report,
    )
    from .runtime.gangs import Waiting, assemble
    from .runtime.local_queues import LocalQueues
    from .runtime.loop import SchedulerRuntime
    from .runtime.service import ServiceOptions, serve

_RUNTIME = {
    "POD_GROUP_LABEL": "_keys",
    "TOPOLOGY_DOMAIN_ANNOTATION": "_keys",
    "TOPOLOGY_MODE_ANNOTATION": "_keys",
    "ConfigError": "runtime.config",
    "SchedulerConfig": "runtime.config",
    "SchedulerRuntime": "runtime.loop",
    "ServiceOptions": "runtime.service",
    "pod_requests": "runtime.convert",
    "node_info": "runtime.convert",
    "pod_group_info": "runtime.convert",
    "pod_info": "runtime.convert",
    "base_units": "runtime.convert",
    "resource_map": "runtime.convert",
    "serve": "runtime.service",
    "FairReport": "runtime.fair_report",
    "NodeFairness": "runtime.fair_report",
    "ResourceFigures": "runtime.fair_report",
    "charged_ledger": "runtime.fair_report",
    "fair_report": "runtime.fair_report",
    "topology_label": "_keys",
    "Waiting": "runtime.gangs",
    "assemble": "runtime.gangs",
    "LocalQueues": "runtime.local_queues",
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
    "CLUSTER_LEVEL",
    "CPU",
    "DEFAULT_FILTERS",
    "DEFAULT_PLUGINS",
    "DEFAULT_QUEUE",
    "DEFAULT_RESCALE_SECONDS",
    "DEFAULT_SCORER",
    "GPU",
    "MEMORY",
    "NODE_LEVEL",
    "PODS",
    "POD_GROUP_LABEL",
    "REGISTRY",
    "TOPOLOGY_DOMAIN_ANNOTATION",
    "TOPOLOGY_MODE_ANNOTATION",
    "Binding",
    "BlockedNodes",
    "Candidate",
    "ClusterState",
    "Code",
    "CohortSpec",
    "ConfigError",
    "Cycle",
    "CycleState",
    "DomainChoicePlugin",
    "FairReport",
    "FairSharing",
    "FilterPlugin",
    "Gang",
    "GangScheduler",
    "Handle",
    "LiveDomain",
    "LocalQueues",
    "NodeFairness",
    "NodeInfo",
    "NodeSelectorRequirement",
    "PermitPlugin",
    "Placement",
    "Placer",
    "PodRequest",
    "PreFilterPlugin",
    "PreScorePlugin",
    "Preemption",
    "Profile",
    "QueueLedger",
    "QueueSpec",
    "Registry",
    "ReservePlugin",
    "ResourceFigures",
    "ResourceQuota",
    "RetryPolicy",
    "RetryStats",
    "SchedulerConfig",
    "SchedulerRuntime",
    "ScorePlugin",
    "Scoring",
    "SelectorOperator",
    "ServiceOptions",
    "Status",
    "Taint",
    "TaintEffect",
    "Toleration",
    "TolerationOperator",
    "TopologyConstraint",
    "TopologyMode",
    "Unschedulable",
    "Victim",
    "Waiting",
    "assemble",
    "base_units",
    "charged_ledger",
    "cohort_specs",
    "elastic_parts",
    "fair_report",
    "fair_sharing",
    "fit_count",
    "gang_amounts",
    "gang_gpus",
    "may_preempt_for_quota",
    "node_info",
    "nominate_victims",
    "place_gang",
    "pod_group_info",
    "pod_info",
    "pod_requests",
    "priced",
    "priced_candidates",
    "queue_specs",
    "quota_admits",
    "rescale_cost",
    "resource_map",
    "select_victims",
    "serve",
    "topology_label",
    "with_shrinks",
]
