"""Derived per-job settings that several parts (validation, objects, scheduler) share."""

from __future__ import annotations

from trainmaster.spec._model import ClusterSpec, Job, TopologyRule


def job_domain_rule(spec: ClusterSpec, job: Job) -> TopologyRule:
    """The topology constraint that applies to a job: its own, else the first policy rule
    whose maxNodes covers it, else anywhere in the cluster."""
    if job.topology is not None:
        return TopologyRule(domain=job.topology.domain, mode=job.topology.mode)
    for rule in spec.scheduler.topology_policy:
        if rule.max_nodes is None or job.nodes <= rule.max_nodes:
            return rule
    return TopologyRule(domain="cluster", mode="preferred")
