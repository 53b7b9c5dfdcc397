"""Derived per-job settings that several parts (validation, objects, policies, scheduler)
share: which topology rule applies to a job or a gang of a size. The mapping itself is
trainmaster.api's `gang_shape` (the simulator's too); these wrap it in the spec's types."""

from __future__ import annotations

from collections.abc import Iterable

from trainmaster.api import GangShape, gang_shape
from trainmaster.api import rule_for_size as _domain_for_size
from trainmaster.spec._model import ClusterSpec, Job, TopologyRule


def rule_for_size(policy: Iterable[TopologyRule], nodes: int) -> TopologyRule:
    """The first rule whose maxNodes covers `nodes` (one pod per node), else anywhere in the
    cluster."""
    domain, mode = _domain_for_size(policy, nodes)
    return TopologyRule(domain=domain, mode=mode)  # type: ignore[arg-type]


def job_gang(spec: ClusterSpec, job: Job) -> GangShape:
    """The gang a job asks the scheduler for."""
    own = (job.topology.domain, job.topology.mode) if job.topology is not None else None
    elastic = ((job.elastic.min_nodes, job.elastic.max_nodes)
               if job.elastic is not None else None)
    return gang_shape(job.nodes, job.gpus_per_pod, job.queue, job.priority, own,
                      spec.scheduler.topology_policy, elastic)


def job_domain_rule(spec: ClusterSpec, job: Job) -> TopologyRule:
    """The topology constraint that applies to a job: its own, else the scheduler policy's
    rule for its size (`nodes`, also for an elastic job: the size the spec checks)."""
    if job.topology is not None:
        return TopologyRule(domain=job.topology.domain, mode=job.topology.mode)
    return rule_for_size(spec.scheduler.topology_policy, job.nodes)
