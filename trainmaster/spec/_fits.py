"""What a valid spec promises that its own nodes can never deliver: a dataset larger than
the node cache that must hold it, a queue's GPU quota or a cohort's summed GPU quota above
every GPU the spec's nodes have, a queue's CPU or memory quota above all of theirs.

Such a spec loads (a quota may be raised ahead of new nodes, a cache resized later), so
`trainmaster validate` prints these as warnings and exits 0, and the mandatory policy
rule `capacity-fits` fails `trainmaster policy check` on them (docs/policies.md): they
would otherwise show up only at warm-up, or as a quota nobody can ever reach.
A job larger than the nodes (or its required domain) is an error of validation itself.
"""

from __future__ import annotations

import contextlib
from collections import defaultdict

from trainmaster.api import GPU_RESOURCE, format_bytes, parse_bytes, parse_quantity
from trainmaster.spec._errors import SpecIssue
from trainmaster.spec._model import ClusterSpec
from trainmaster.spec._semantic import cohort_root


def capacity_issues(spec: ClusterSpec) -> list[SpecIssue]:
    """Every promise of the spec its nodes cannot keep, each naming the field and the fix."""
    return [*_dataset_issues(spec), *_quota_issues(spec)]


def _dataset_issues(spec: ClusterSpec) -> list[SpecIssue]:
    cache = spec.cache
    if cache is None:
        return []
    capacity = parse_bytes(cache.capacity)
    sizes = {d.name: parse_bytes(d.size) for d in cache.datasets}
    out = []
    for i, dataset in enumerate(cache.datasets):
        if sizes[dataset.name] > capacity:
            out.append(SpecIssue(
                f"cache.datasets[{i}].size",
                f"{dataset.size} is more than the node cache's {cache.capacity} "
                f"(cache.capacity): no node can ever hold it and its warm-up fails; raise "
                f"cache.capacity (at most the nodes' localDisk) or split the dataset"))
    for j, job in enumerate(spec.jobs):
        named = [d for d in dict.fromkeys(job.datasets) if d in sizes]
        total = sum(sizes[d] for d in named)
        if len(named) > 1 and total > capacity:
            out.append(SpecIssue(
                f"jobs[{j}].datasets",
                f"the job's datasets ({', '.join(named)}) need {format_bytes(total)} on "
                f"each of its nodes, more than the node cache's {cache.capacity} "
                f"(cache.capacity): they can never all be warm at once; raise "
                f"cache.capacity or give the job fewer datasets"))
    return out


def _resource_quota_issues(spec: ClusterSpec, k: int) -> list[SpecIssue]:
    """A queue's CPU or memory quota above what the spec's nodes have in all."""
    queue = spec.scheduler.queues[k]
    totals = {"cpu": (sum(n.cpu for n in spec.nodes), "cores"),
              "memory": (sum(n.memory_bytes for n in spec.nodes), "bytes")}
    out = []
    for i, resource in enumerate(queue.resources):
        if resource.name not in totals:
            continue
        total, unit = totals[resource.name]
        try:
            asked = parse_quantity(resource.nominal_quota)
        except ValueError:
            continue  # a bad quantity is a spec error
        if asked > total:
            have = f"{total} cores" if unit == "cores" else format_bytes(total)
            out.append(SpecIssue(
                f"scheduler.queues[{k}].resources[{i}].nominalQuota",
                f"queue {queue.name!r} has a {resource.name} quota of "
                f"{resource.nominal_quota}, but the spec's nodes have {have} in all: it can "
                f"never use its quota; lower it, or add nodes"))
    return out


def _quota_issues(spec: ClusterSpec) -> list[SpecIssue]:
    gpus = sum(n.gpus for n in spec.nodes)
    sched = spec.scheduler
    out = []
    for k, queue in enumerate(sched.queues):
        if queue.quota is not None and queue.quota > gpus:
            field = "nominalQuota" if queue.nominal_quota is not None else (
                "gpuQuota" if queue.gpu_quota is not None else "resources")
            out.append(SpecIssue(
                f"scheduler.queues[{k}].{field}",
                f"queue {queue.name!r} has a quota of {queue.quota} GPUs, but the spec's "
                f"nodes have {gpus}: it can never use its quota; lower it to at most "
                f"{gpus}, or add nodes to the topology"))
        out += _resource_quota_issues(spec, k)
    parents = {c.name: c.parent for c in sched.cohorts}

    def root(cohort: str) -> str:
        return cohort_root(parents, cohort)

    totals: dict[str, int] = defaultdict(int)
    for queue in sched.queues:
        if queue.cohort is not None:
            totals[root(queue.cohort)] += queue.quota or 0
    for cohort in sched.cohorts:
        for resource in cohort.resources:
            if resource.name == GPU_RESOURCE:
                with contextlib.suppress(ValueError):  # a bad quantity is a spec error
                    totals[root(cohort.name)] += int(parse_quantity(resource.nominal_quota))
    for name, total in sorted(totals.items()):
        if total > gpus:
            members = [q.name for q in sched.queues
                       if q.cohort is not None and root(q.cohort) == name]
            out.append(SpecIssue(
                "scheduler.queues",
                f"cohort {name!r} sums to {total} GPUs of quota (queues "
                f"{', '.join(members)} and its cohorts' own), but the spec's nodes have "
                f"{gpus}: its queues can never all reach their quota; lower the quotas to "
                f"sum to at most {gpus}, or add nodes"))
    return out
