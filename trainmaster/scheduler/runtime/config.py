"""The runtime's settings: the config file the Deployment mounts, plus command-line overrides.

The file is what ``trainmaster.objects._scheduler.scheduler_config(spec)`` writes (camelCase
keys: schedulerName, namespace, levels, gangTimeoutSeconds, bindConcurrency, clientQps,
leaderElection {leaseName, leaseNamespace}, topologyPolicy, preemption, queues
[{name, nominalQuota, cohort, borrowingLimit, lendingLimit, resources, fairSharing,
preemption}], cohorts [{name, parent, resources, fairSharing}], fairSharing {enable,
preemptionStrategies}, admissionFairSharing {usageHalfLifeSeconds}, defaultQueue,
namespaces, localQueueNamespaces; by hand also nodeSelector, retryIndex and
fullPassSeconds). Keys the runtime does not
know are an error rather than silently ignored, so a typo never means a default.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import yaml

from trainmaster.api import PolicyRule, default_policy, rule_for_size

from ..framework.model import CLUSTER_LEVEL, NODE_LEVEL, TopologyConstraint, TopologyMode
from ..plugins.quota import (
    DEFAULT_QUEUE,
    CohortSpec,
    FairSharing,
    QueueSpec,
    cohort_specs,
    fair_sharing,
    queue_specs,
)
from ..state.fair_share import STRATEGIES
from .convert import base_units
from .retry import RetryPolicy


class ConfigError(ValueError):
    """The scheduler's config file or options are not usable."""


@dataclass(frozen=True, slots=True)
class LeaderElection:
    """Lease-based leader election, with client-go's default timings."""

    enabled: bool = True
    lease_name: str = "trainmaster-scheduler"
    lease_namespace: str = "kube-system"
    lease_duration: float = 15.0
    """A standby takes over this long after the leader's last renewal it observed."""
    renew_deadline: float = 10.0
    """The leader gives up (and stops scheduling) if it cannot renew for this long."""
    retry_period: float = 2.0
    """How often the leader renews and a standby retries."""

    def __post_init__(self) -> None:
        if not 0 < self.retry_period < self.renew_deadline < self.lease_duration:
            raise ConfigError(
                "leader election needs 0 < retryPeriod < renewDeadline < leaseDuration, got "
                f"{self.retry_period}, {self.renew_deadline}, {self.lease_duration}"
            )


@dataclass(frozen=True, slots=True)
class SchedulerConfig:
    scheduler_name: str = "trainmaster-scheduler"
    """Pods whose ``spec.schedulerName`` is this are ours; everything else is only counted."""
    namespace: str = "kube-system"
    levels: tuple[str, ...] = ("spine", "leaf")
    """Topology levels, top first; node label ``topology.trainmaster.io/<level>``."""
    gang_timeout_seconds: float = 300.0
    """A gang unschedulable this long is starving: it reserves the domain it needs and
    gangs behind it may no longer backfill there (see ``GangScheduler``)."""
    bind_concurrency: int = 64
    client_qps: float = 500.0
    client_burst: int = 0
    """0: ``max(client_qps, bind_concurrency)``."""
    leader_election: LeaderElection = LeaderElection()
    topology_policy: tuple[PolicyRule, ...] = ()
    """Where a gang goes when its PodGroup names no topology (the spec's rules: the first
    whose maxNodes covers the gang's pods applies). Empty: the spec's default for
    ``levels``."""
    metrics_address: str = "127.0.0.1"
    metrics_port: int = 10259
    """0 disables the /metrics server."""
    backoff_initial: float = 1.0
    backoff_max: float = 60.0
    """An unschedulable gang is retried on any cluster change, else after its backoff
    (doubling from ``backoff_initial`` up to ``backoff_max``)."""
    retry_index: bool = True
    """Retry only the gangs an event can help (docs/scheduler.md, "Who is retried");
    False: every queued gang at every cycle, as before the index (for comparisons)."""
    full_pass_seconds: float = 300.0
    """Seconds between two cycles that retry every queued gang (the index's safety net)."""
    bind_attempts: int = 5
    """Tries per pod on transient errors (timeouts, 429, 5xx) before the gang is undone."""
    report_interval: float = 5.0
    """Least seconds between two PodScheduled/Event updates for the same gang."""
    usage_history_interval: float = 30.0
    """Seconds between two writes of the queues' decayed usage (with a usage half-life),
    which the next leader loads (``history.py``)."""
    preemption: bool = True
    """Gangs whose pods' ``preemptionPolicy`` is ``PreemptLowerPriority`` (the default, as
    in kube-scheduler) may evict whole lower-priority gangs; False: never preempt."""
    queues: tuple[QueueSpec, ...] = ()
    """Queue quotas (Kueue's names); empty: no quota is enforced."""
    default_queue: str = DEFAULT_QUEUE
    """The queue of gangs whose PodGroup and pods name none."""
    cohorts: tuple[CohortSpec, ...] = ()
    """Cohorts with a parent, quota or weight (cohorts only queues name need none)."""
    fair_sharing: FairSharing = dataclasses.field(default_factory=FairSharing)
    node_selector: Mapping[str, str] = dataclasses.field(default_factory=dict)
    """Only nodes with all these labels are this scheduler's (a partition of the cluster,
    e.g. a second instance on its own nodes); others are not seen at all. Empty: every
    node."""

    namespaces: tuple[str, ...] = ()
    """The namespaces whose pods it binds (the spec's ``scheduler.namespaces`` and the
    cluster's namespace); a pod naming it elsewhere is told so and left alone. Empty:
    every namespace (a scheduler run by hand, with rights everywhere)."""

    local_queue_namespaces: tuple[str, ...] = ()
    """Namespaces whose queue label names a LocalQueue of the namespace (resolved to the
    queue its ``spec.clusterQueue`` names), not a queue; unlabelled work there goes to
    their LocalQueue ``default``. Elsewhere the label names a queue directly."""

    def serves(self, namespace: str) -> bool:
        return not self.namespaces or namespace in self.namespaces

    @property
    def burst(self) -> int:
        return self.client_burst or max(int(self.client_qps), self.bind_concurrency)

    @property
    def policy(self) -> tuple[PolicyRule, ...]:
        return self.topology_policy or default_policy(self.levels)

    def topology_for(self, pods: int) -> TopologyConstraint:
        domain, mode = rule_for_size(self.policy, pods)
        return TopologyConstraint(domain, TopologyMode(mode))

    def replace(self, **changes: Any) -> SchedulerConfig:
        return dataclasses.replace(self, **changes)

    @classmethod
    def from_mapping(cls, data: Mapping[str, Any]) -> SchedulerConfig:
        """Read the camelCase config document (see module doc)."""
        known = {
            "schedulerName", "namespace", "levels", "gangTimeoutSeconds", "preemption",
            "bindConcurrency", "clientQps", "clientBurst", "leaderElection", "topologyPolicy",
            "metricsAddress", "metricsPort", "backoffInitialSeconds", "backoffMaxSeconds",
            "bindAttempts", "reportIntervalSeconds", "queues", "defaultQueue", "nodeSelector",
            "namespaces", "localQueueNamespaces", "usageHistoryIntervalSeconds",
            "cohorts", "fairSharing", "admissionFairSharing", "retryIndex", "fullPassSeconds",
        }  # fmt: skip
        unknown = sorted(set(data) - known)
        if unknown:
            raise ConfigError(f"unknown scheduler config keys: {', '.join(unknown)}")
        out: dict[str, Any] = {}
        simple = {
            "schedulerName": ("scheduler_name", str),
            "namespace": ("namespace", str),
            "gangTimeoutSeconds": ("gang_timeout_seconds", float),
            "preemption": ("preemption", bool),
            "bindConcurrency": ("bind_concurrency", int),
            "clientQps": ("client_qps", float),
            "clientBurst": ("client_burst", int),
            "metricsAddress": ("metrics_address", str),
            "metricsPort": ("metrics_port", int),
            "backoffInitialSeconds": ("backoff_initial", float),
            "backoffMaxSeconds": ("backoff_max", float),
            "retryIndex": ("retry_index", bool),
            "fullPassSeconds": ("full_pass_seconds", float),
            "bindAttempts": ("bind_attempts", int),
            "reportIntervalSeconds": ("report_interval", float),
            "usageHistoryIntervalSeconds": ("usage_history_interval", float),
            "defaultQueue": ("default_queue", str),
        }
        for key, (attr, kind) in simple.items():
            if key in data:
                try:
                    out[attr] = kind(data[key])
                except (TypeError, ValueError):
                    raise ConfigError(f"{key}: {data[key]!r} is not a {kind.__name__}") from None
        if "levels" in data:
            out["levels"] = tuple(str(x) for x in data["levels"])
        if "leaderElection" in data:
            out["leader_election"] = _leader_election(data["leaderElection"], data)
        elif "namespace" in data:
            out["leader_election"] = LeaderElection(lease_namespace=str(data["namespace"]))
        if "topologyPolicy" in data:
            out["topology_policy"] = tuple(_rule(r) for r in data["topologyPolicy"])
        if "queues" in data:
            out["queues"] = _queues(data["queues"])
        if "cohorts" in data:
            out["cohorts"] = _cohorts(data["cohorts"])
        if "fairSharing" in data or "admissionFairSharing" in data:
            out["fair_sharing"] = _fair_sharing(data.get("fairSharing"),
                                                data.get("admissionFairSharing"))
        if "nodeSelector" in data:
            selector = data["nodeSelector"]
            if not isinstance(selector, Mapping):
                raise ConfigError("nodeSelector must be a mapping of label to value")
            out["node_selector"] = {str(k): str(v) for k, v in selector.items()}
        if "namespaces" in data:
            names = data["namespaces"]
            if not isinstance(names, list) or not all(isinstance(n, str) and n for n in names):
                raise ConfigError("namespaces must be a list of namespace names")
            out["namespaces"] = tuple(dict.fromkeys(names))
        if "localQueueNamespaces" in data:
            names = data["localQueueNamespaces"]
            if not isinstance(names, list) or not all(isinstance(n, str) and n for n in names):
                raise ConfigError("localQueueNamespaces must be a list of namespace names")
            out["local_queue_namespaces"] = tuple(dict.fromkeys(names))
        config = cls(**out)
        config.validate()
        return config

    @classmethod
    def load(cls, path: Path) -> SchedulerConfig:
        try:
            data = yaml.safe_load(path.read_text()) or {}
        except (OSError, yaml.YAMLError) as err:
            raise ConfigError(f"cannot read scheduler config {path}: {err}") from None
        if not isinstance(data, dict):
            raise ConfigError(f"{path}: the scheduler config must be a mapping")
        return cls.from_mapping(data)

    def retry_policy(self) -> RetryPolicy:
        """Who the cycle retries (``retry.py``), with this config's backoff."""
        return RetryPolicy(index=self.retry_index, backoff_initial=self.backoff_initial,
                           backoff_max=self.backoff_max,
                           full_pass_every=self.full_pass_seconds)

    def validate(self) -> None:
        if self.bind_concurrency < 1:
            raise ConfigError("bindConcurrency must be >= 1")
        if self.client_qps <= 0:
            raise ConfigError("clientQps must be > 0")
        if self.bind_attempts < 1:
            raise ConfigError("bindAttempts must be >= 1")
        if self.full_pass_seconds <= 0:
            raise ConfigError("fullPassSeconds must be > 0 (seconds between two full passes)")
        if len(set(self.levels)) != len(self.levels):
            raise ConfigError(f"levels repeat a name: {list(self.levels)}")
        allowed = {NODE_LEVEL, CLUSTER_LEVEL, *self.levels}
        for rule in self.policy:
            if rule.domain not in allowed:
                raise ConfigError(
                    f"topologyPolicy domain {rule.domain!r} is not one of {sorted(allowed)}"
                )


def _leader_election(raw: Any, doc: Mapping[str, Any]) -> LeaderElection:
    if not isinstance(raw, Mapping):
        raise ConfigError("leaderElection must be a mapping")
    keys = {
        "leaderElect": ("enabled", bool),
        "leaseName": ("lease_name", str),
        "leaseNamespace": ("lease_namespace", str),
        "leaseDurationSeconds": ("lease_duration", float),
        "renewDeadlineSeconds": ("renew_deadline", float),
        "retryPeriodSeconds": ("retry_period", float),
    }
    unknown = sorted(set(raw) - set(keys))
    if unknown:
        raise ConfigError(f"unknown leaderElection keys: {', '.join(unknown)}")
    values: dict[str, Any] = {"lease_namespace": str(doc.get("namespace", "kube-system"))}
    for key, (attr, kind) in keys.items():
        if key in raw:
            values[attr] = kind(raw[key])
    return LeaderElection(**values)


def _queues(raw: Any) -> tuple[QueueSpec, ...]:
    if not isinstance(raw, list) or not all(isinstance(q, Mapping) and "name" in q for q in raw):
        raise ConfigError("queues must be a list of mappings with a name")
    allowed = {"name", "nominalQuota", "gpuQuota", "borrowingLimit", "lendingLimit", "cohort",
               "preemption", "priority", "resources", "fairSharing"}
    for q in raw:
        unknown = sorted(set(q) - allowed)
        if unknown:
            raise ConfigError(f"queues[{q['name']}]: unknown keys {', '.join(unknown)}")
    try:
        specs = tuple(queue_specs(raw, base_units))
    except (TypeError, ValueError) as err:
        raise ConfigError(f"queues: {err}") from None
    names = [q.name for q in specs]
    if len(set(names)) != len(names):
        raise ConfigError(f"queues repeat a name: {names}")
    for q in specs:
        for what, value in (("nominalQuota", q.nominal_quota),
                            ("borrowingLimit", q.borrowing_limit)):
            if value is not None and value < 0:
                raise ConfigError(f"queues[{q.name}].{what} must be >= 0, got {value}")
    return specs


def _cohorts(raw: Any) -> tuple[CohortSpec, ...]:
    if not isinstance(raw, list) or not all(isinstance(c, Mapping) and "name" in c for c in raw):
        raise ConfigError("cohorts must be a list of mappings with a name")
    for c in raw:
        unknown = sorted(set(c) - {"name", "parent", "resources", "fairSharing"})
        if unknown:
            raise ConfigError(f"cohorts[{c['name']}]: unknown keys {', '.join(unknown)}")
    try:
        specs = tuple(cohort_specs(raw, base_units))
    except (TypeError, ValueError) as err:
        raise ConfigError(f"cohorts: {err}") from None
    parents = {c.name: c.parent for c in specs}
    for name in parents:  # the spec's validation says the same with the field's path
        seen, at = {name}, parents[name]
        while at is not None:
            if at in seen:
                raise ConfigError(f"cohorts[{name}]: its parents form a cycle through {at}")
            seen.add(at)
            at = parents.get(at)
    return specs


def _fair_sharing(raw: Any, admission: Any) -> FairSharing:
    for key, value in (("fairSharing", raw), ("admissionFairSharing", admission)):
        if value is not None and not isinstance(value, Mapping):
            raise ConfigError(f"{key} must be a mapping")
    try:
        fair = fair_sharing(raw, admission)
    except (TypeError, ValueError) as err:
        raise ConfigError(f"fairSharing: {err}") from None
    bad = [s for s in fair.preemption_strategies if s not in STRATEGIES]
    if bad:
        raise ConfigError(f"fairSharing.preemptionStrategies: {', '.join(bad)} unknown; use "
                          f"{' or '.join(STRATEGIES)}")
    if fair.usage_half_life is not None and fair.usage_half_life <= 0:
        raise ConfigError("admissionFairSharing.usageHalfLifeSeconds must be > 0")
    return fair


def _rule(raw: Any) -> PolicyRule:
    """One rule; maxNodes checked as the spec's TopologyRule checks it (>= 1), the domain
    against the levels in validate()."""
    if not isinstance(raw, Mapping) or "domain" not in raw:
        raise ConfigError(f"topologyPolicy rule needs a domain: {raw!r}")
    try:
        mode = TopologyMode(raw.get("mode", "preferred"))
    except ValueError:
        raise ConfigError(f"topologyPolicy mode {raw.get('mode')!r}: required|preferred") from None
    max_nodes = raw.get("maxNodes", raw.get("maxPods"))
    try:
        limit = None if max_nodes is None else int(max_nodes)
    except (TypeError, ValueError) as err:
        raise ConfigError(f"topologyPolicy rule {dict(raw)!r}: maxNodes: {err}") from None
    if limit is not None and limit < 1:
        raise ConfigError(f"topologyPolicy rule {dict(raw)!r}: maxNodes must be >= 1")
    return PolicyRule(domain=str(raw["domain"]), mode=mode.value, max_nodes=limit)
