"""Derived per-job settings that several parts (validation, objects, policies, scheduler)
share: which topology rule applies to a job or a gang of a size."""

from __future__ import annotations

from collections.abc import Iterable

from trainmaster.spec._model import ClusterSpec, Job, TopologyRule


def rule_for_size(policy: Iterable[TopologyRule], nodes: int) -> TopologyRule:
    """The first rule whose maxNodes covers `nodes` (one pod per node), else anywhere in the
    cluster."""
    for rule in policy:
        if rule.max_nodes is None or nodes <= rule.max_nodes:
            return rule
    return TopologyRule(domain="cluster", mode="preferred")


def job_domain_rule(spec: ClusterSpec, job: Job) -> TopologyRule:
    """The topology constraint that applies to a job: its own, else the scheduler policy's
    rule for its size."""
    if job.topology is not None:
        return TopologyRule(domain=job.topology.domain, mode=job.topology.mode)
    return rule_for_size(spec.scheduler.topology_policy, job.nodes)
