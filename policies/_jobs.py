"""Rules about training jobs as the spec declares them: recovery, shape, placement, quota."""

from __future__ import annotations

from collections.abc import Iterator, Sequence

from policies._core import KubeObject, Violation, rule
from trainmaster.spec import ClusterSpec, DomainCapacity, capacity_issues, job_domain_rule

MAX_RESTARTS = 100
"""The platform's ceiling on restartPolicy.maxRestarts. The schema allows 10000, which with
the 10-minute backoff cap keeps a crash-looping gang on its GPUs for about two months."""


@rule(
    "job-checkpoint",
    "mandatory",
    "cluster",
    "Every training job checkpoints, so a failure costs minutes, not the whole run.",
)
def job_checkpoint(spec: ClusterSpec | None, objects: Sequence[KubeObject]) -> Iterator[Violation]:
    if spec is None:
        return
    for i, job in enumerate(spec.jobs):
        if job.checkpoint is None:
            yield Violation(
                f"jobs[{i}].checkpoint",
                f"job {job.name!r} does not checkpoint: a failure loses all its progress and "
                "the operator has nothing to resume from; add `checkpoint: {volume: <pvc>, "
                f"path: /checkpoints/{job.name}}}`",
                job=job.name,
            )


@rule(
    "job-max-restarts",
    "mandatory",
    "cluster",
    f"Every job has a finite restartPolicy.maxRestarts (at most {MAX_RESTARTS}).",
)
def job_max_restarts(
    spec: ClusterSpec | None, objects: Sequence[KubeObject]
) -> Iterator[Violation]:
    if spec is None:
        return
    for i, job in enumerate(spec.jobs):
        limit = job.restart_policy.max_restarts
        path = f"jobs[{i}].restartPolicy.maxRestarts"
        # The model types it as int; a spec built without validation may hold anything.
        if not isinstance(limit, int) or isinstance(limit, bool) or limit < 0:
            yield Violation(
                path,
                f"{limit!r} is not a restart count: set a whole number from 0 to {MAX_RESTARTS}",
                job=job.name,
            )
        elif limit > MAX_RESTARTS:
            yield Violation(
                path,
                f"{limit} restarts is as good as unbounded: a job that keeps failing holds its "
                f"{job.nodes * job.gpus_per_pod} GPUs for days; use at most {MAX_RESTARTS}",
                job=job.name,
            )


@rule(
    "multi-node-whole-nodes",
    "mandatory",
    "cluster",
    "A job that spans several nodes takes all the GPUs of each node it runs on.",
)
def multi_node_whole_nodes(
    spec: ClusterSpec | None, objects: Sequence[KubeObject]
) -> Iterator[Violation]:
    if spec is None:
        return
    gpu_counts = sorted({n.gpus for n in spec.nodes})
    for i, job in enumerate(spec.jobs):
        if job.nodes <= 1:
            continue
        # Pods may land on any node with enough GPUs; each such node must be used whole,
        # or the leftover GPUs strand behind a pod whose NICs the gang saturates.
        sizes = [size for size in gpu_counts if size > job.gpus_per_pod]
        if sizes:
            shown = ", ".join(str(s) for s in sizes)
            yield Violation(
                f"jobs[{i}].gpusPerPod",
                f"{job.gpus_per_pod} GPUs per pod on nodes with {shown} GPUs: a {job.nodes}-node "
                "job must take whole nodes; set gpusPerPod to the node's GPU count, or run it "
                "on one node (nodes: 1)",
                job=job.name,
            )


@rule(
    "topology-domain-fits",
    "mandatory",
    "cluster",
    "A job's required topology domain (and the cluster) can hold all of its pods.",
    defense_in_depth="spec validation",
)
def topology_domain_fits(
    spec: ClusterSpec | None, objects: Sequence[KubeObject]
) -> Iterator[Violation]:
    if spec is None:
        return
    capacity = DomainCapacity(spec.nodes, spec.topology.levels)
    for i, job in enumerate(spec.jobs):
        total = capacity.largest(job.gpus_per_pod, "cluster") or 0
        if job.nodes > total:
            yield Violation(
                f"jobs[{i}].nodes",
                f"{job.nodes} pods but only {total} nodes have {job.gpus_per_pod} or more GPUs: "
                "the gang can never start; use fewer nodes or fewer GPUs per pod",
                job=job.name,
            )
            continue
        domain_rule = job_domain_rule(spec, job)
        source = f"jobs[{i}].topology" if job.topology else "scheduler.topologyPolicy"
        largest = capacity.largest(job.gpus_per_pod, domain_rule.domain)
        if largest is None:
            levels = ", ".join(("node", *reversed(spec.topology.levels), "cluster"))
            yield Violation(
                f"{source}.domain" if job.topology else source,
                f"{domain_rule.domain!r} is not a topology domain: use one of {levels}",
                job=job.name,
            )
        elif domain_rule.mode == "required" and job.nodes > largest:
            yield Violation(
                f"jobs[{i}].nodes",
                f"{job.nodes} pods must share one {domain_rule.domain} ({source} requires it) "
                f"but the largest holds {largest} suitable nodes: the gang can never start; "
                "use mode `preferred`, a larger domain, or fewer nodes",
                job=job.name,
            )


@rule(
    "queue-quota",
    "advisory",
    "cluster",
    "The jobs of a queue fit its GPU quota at once.",
)
def queue_quota(spec: ClusterSpec | None, objects: Sequence[KubeObject]) -> Iterator[Violation]:
    if spec is None:
        return
    for k, queue in enumerate(spec.scheduler.queues):
        quota = queue.quota
        if quota is None:
            continue
        jobs = [j for j in spec.jobs if j.queue == queue.name]
        demand = sum(j.nodes * j.gpus_per_pod for j in jobs)
        if demand <= quota:
            continue
        # With a cohort it may borrow beyond its quota, up to its borrowing limit.
        ceiling = (quota + queue.borrowing_limit if queue.borrowing_limit is not None
                   else None) if queue.cohort is not None else quota
        too_big = [j.name for j in jobs
                   if ceiling is not None and j.nodes * j.gpus_per_pod > ceiling]
        parts = ", ".join(f"{j.name} {j.nodes * j.gpus_per_pod}" for j in jobs)
        message = (
            f"the queue's jobs ask for {demand} GPUs ({parts}), more than its quota of "
            f"{quota}: they will wait for each other"
        )
        if too_big:
            message += f", and {', '.join(too_big)} can never start under this quota"
        yield Violation(
            f"scheduler.queues[{k}]." + ("gpuQuota" if queue.nominal_quota is None
                                          else "nominalQuota"),
            f"{message}; raise the quota or move jobs to another queue",
        )


@rule(
    "capacity-fits",
    "mandatory",
    "cluster",
    "What the spec promises fits its own nodes: every dataset fits the node cache, and no "
    "queue's quota (GPUs, CPU, memory) or cohort's summed GPU quota exceeds the spec's nodes.",
)
def capacity_fits(spec: ClusterSpec | None, objects: Sequence[KubeObject]) -> Iterator[Violation]:
    # The same findings `trainmaster validate` prints as warnings (trainmaster.spec._fits).
    if spec is None:
        return
    for issue in capacity_issues(spec):
        yield Violation(issue.path, issue.message)
