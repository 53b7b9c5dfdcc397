"""Rules the JSON Schema cannot express: references, uniqueness, capacity and addressing.

Over 500 lines on purpose: one short generator per rule (about 20), each independent;
the list of rules the loader runs is the whole of this module, read top to bottom.

Each check takes the schema-valid model and yields SpecIssue values (path, message). The
loader adds line numbers. Checks never raise: a broken part is reported and skipped.
"""

from __future__ import annotations

import contextlib
import ipaddress
import re
from collections import Counter
from collections.abc import Generator, Iterator, Mapping, Sequence

from trainmaster.api import format_bytes, parse_bytes, parse_quantity
from trainmaster.spec._capacity import DomainCapacity
from trainmaster.spec._errors import SpecIssue
from trainmaster.spec._model import (
    DATASET_SCHEMES,
    GPU_RESOURCE_NAME,
    ClusterSpec,
    Cohort,
    Job,
    Queue,
    ResourceQuota,
    Switch,
    Topology,
)
from trainmaster.spec._rules import job_domain_rule

MAX_NODES = 100_000
SPECIAL_DOMAINS = ("node", "cluster")
_ENV_NAME = re.compile(r"^[A-Za-z_][A-Za-z0-9_]*$")
_HP_NAME = re.compile(r"^[A-Za-z][A-Za-z0-9_]*$")


def check(spec: ClusterSpec) -> list[SpecIssue]:
    issues = list(_topology(spec.topology))
    if issues:  # node-dependent checks need a sound tree
        return issues
    for part in (_networks, _scheduler, _cache, _jobs):
        issues.extend(part(spec))
    return issues


def _dupes(names: list[str]) -> set[str]:
    return {name for name, count in Counter(names).items() if count > 1}


# --- topology ------------------------------------------------------------------------


def _topology(topo: Topology) -> Iterator[SpecIssue]:
    if (topo.generate is None) == (topo.switches is None):
        yield SpecIssue(
            "topology",
            "give exactly one of `generate` (a regular tree) or `switches` (an explicit tree)",
        )
        return
    depth = len(topo.levels)
    if len(set(topo.levels)) != depth or set(topo.levels) & set(SPECIAL_DOMAINS):
        yield SpecIssue(
            "topology.levels", "level names must be unique and may not be `node` or `cluster`"
        )
    for level in sorted(set(topo.node_labels) - set(topo.levels)):
        yield SpecIssue(
            f"topology.nodeLabels.{level}",
            f"{level!r} is not a level of topology.levels ({', '.join(topo.levels)}): "
            "map only those levels",
        )
    if topo.generate is not None:
        gen = topo.generate
        if len(gen.switches_per_level) != depth:
            yield SpecIssue(
                "topology.generate.switchesPerLevel",
                f"has {len(gen.switches_per_level)} entries but topology.levels "
                f"names {depth} levels: give one count per level",
            )
            return
        total = gen.nodes_per_leaf
        for count in gen.switches_per_level:
            total *= count
        if total > MAX_NODES:
            yield SpecIssue(
                "topology.generate",
                f"expands to {total} nodes, more than the "
                f"{MAX_NODES} trainmaster supports: use smaller counts",
            )
        return
    yield from _tree(topo.switches or [], "topology.switches", 1, depth)
    switch_names: list[str] = []
    node_names: list[str] = []
    _collect(topo.switches or [], switch_names, node_names)
    if len(node_names) > MAX_NODES:
        yield SpecIssue(
            "topology.switches",
            f"declares {len(node_names)} nodes, more than the {MAX_NODES} trainmaster supports",
        )
    for name in sorted(_dupes(switch_names + node_names)):
        yield SpecIssue(
            "topology.switches",
            f"the name {name!r} is used more than once: switch and node names must be unique",
        )


def _tree(switches: list[Switch], path: str, level: int, depth: int) -> Iterator[SpecIssue]:
    for i, sw in enumerate(switches):
        here = f"{path}[{i}]"
        if level < depth:
            if sw.switches is None or sw.nodes is not None:
                yield SpecIssue(
                    here,
                    f"switch {sw.name!r} is at level {level} of {depth}: it "
                    "needs `switches` (one level down) and no `nodes`",
                )
            else:
                yield from _tree(sw.switches, f"{here}.switches", level + 1, depth)
        elif sw.switches is not None or sw.nodes is None:
            yield SpecIssue(
                here,
                f"switch {sw.name!r} is a leaf (level {depth}): it needs "
                "`nodes` (a count or a list) and no `switches`",
            )


def _collect(switches: list[Switch], switch_names: list[str], node_names: list[str]) -> None:
    for sw in switches:
        switch_names.append(sw.name)
        _collect(sw.switches or [], switch_names, node_names)
        if isinstance(sw.nodes, int):
            node_names.extend(f"{sw.name}-node-{i}" for i in range(sw.nodes))
        elif sw.nodes:
            node_names.extend(n.name for n in sw.nodes)


# --- networks ------------------------------------------------------------------------


def _networks(spec: ClusterSpec) -> Iterator[SpecIssue]:
    compute = spec.networks.compute
    subnets: list[tuple[str, ipaddress.IPv4Network]] = []
    for i, rail in enumerate(compute.rails):
        net = yield from _subnet(f"networks.compute.rails[{i}].subnet", rail.subnet)
        if net is not None:
            subnets.append((f"networks.compute.rails[{i}].subnet", net))
    storage = spec.networks.storage
    if storage is not None:
        net = yield from _subnet("networks.storage.subnet", storage.subnet)
        if net is not None:
            subnets.append(("networks.storage.subnet", net))
    for a in range(len(subnets)):
        for b in range(a + 1, len(subnets)):
            (path_a, net_a), (path_b, net_b) = subnets[a], subnets[b]
            if net_a.overlaps(net_b):
                yield SpecIssue(
                    path_b,
                    f"{net_b} overlaps {net_a} of {path_a}: every rail and "
                    "the storage network need their own subnet",
                )
    rail_names = [rail.name or f"rail{i}" for i, rail in enumerate(compute.rails)]
    for name in sorted(_dupes(rail_names)):
        yield SpecIssue("networks.compute.rails", f"rail name {name!r} is used more than once")
    if compute.fabric == "roce" and compute.lossless is None:
        yield SpecIssue(
            "networks.compute.lossless",
            "a RoCE fabric needs lossless settings: "
            "add `lossless: {pfcPriority: 3, ecn: true, gidIndex: 3}` (your "
            "switches' values)",
        )
    short = sorted({n.nics for n in spec.nodes if n.nics < len(compute.rails)})
    if short:
        yield SpecIssue(
            "topology.node.nics",
            f"nodes with {short[0]} NICs cannot join "
            f"{len(compute.rails)} compute rails: give every node one NIC per rail",
        )
    if storage is not None and storage.attach != "all":
        known = {n.name for n in spec.nodes} | {s for n in spec.nodes for s in n.switches}
        for i, name in enumerate(storage.attach):
            if name not in known:
                yield SpecIssue(
                    f"networks.storage.attach[{i}]", f"{name!r} is not a switch or node of topology"
                )


def _subnet(path: str, text: str) -> Generator[SpecIssue, None, ipaddress.IPv4Network | None]:
    try:
        return ipaddress.IPv4Network(text)
    except ValueError as exc:
        yield SpecIssue(
            path,
            f"{text!r} is not a valid subnet ({exc}): write the network address, e.g. 10.10.0.0/16",
        )
        return None


# --- scheduler -----------------------------------------------------------------------


def _domains(spec: ClusterSpec) -> tuple[str, ...]:
    return ("node", *reversed(spec.topology.levels), "cluster")


def _scheduler(spec: ClusterSpec) -> Iterator[SpecIssue]:
    sched = spec.scheduler
    yield from queue_issues(sched.queues, cohorts=sched.cohorts)
    yield from _local_queue_issues(spec)
    domains = _domains(spec)
    for i, rule in enumerate(sched.topology_policy):
        if rule.domain not in domains:
            yield SpecIssue(
                f"scheduler.topologyPolicy[{i}].domain",
                f"{rule.domain!r} is not a topology domain: use one of {', '.join(domains)}",
            )


def _local_queue_issues(spec: ClusterSpec) -> Iterator[SpecIssue]:
    """Each LocalQueue points at a queue that exists, in a namespace the scheduler serves
    other than the cluster's own, and is declared once."""
    sched = spec.scheduler
    queues = [q.name for q in sched.queues]
    seen: set[tuple[str, str]] = set()
    for i, local in enumerate(sched.local_queues):
        path = f"scheduler.localQueues[{i}]"
        if local.cluster_queue not in queues:
            yield SpecIssue(f"{path}.clusterQueue",
                            f"{local.cluster_queue!r} is not a queue of scheduler.queues: "
                            f"name one of {', '.join(queues)}, or add it there")
        if local.namespace == spec.metadata.namespace:
            yield SpecIssue(f"{path}.namespace",
                            f"{local.namespace!r} is the cluster's namespace, whose jobs name "
                            "scheduler queues directly (jobs[].queue): put the LocalQueue in "
                            "a team's namespace")
        elif local.namespace not in sched.namespaces:
            yield SpecIssue(f"{path}.namespace",
                            f"namespace {local.namespace!r} is not served by the scheduler: "
                            "add it to scheduler.namespaces")
        key = (local.namespace, local.name)
        if key in seen:
            yield SpecIssue(f"{path}.name", f"LocalQueue {local.namespace}/{local.name} is "
                            "declared more than once")
        seen.add(key)


def _resource_issues(resources: Sequence[ResourceQuota], path: str,
                     has_cohort: bool) -> Iterator[SpecIssue]:
    for name in sorted(_dupes([r.name for r in resources])):
        yield SpecIssue(f"{path}.resources", f"resource {name!r} is listed more than once")
    for k, r in enumerate(resources):
        at = f"{path}.resources[{k}]"
        amounts = {}
        for key, value in (("nominalQuota", r.nominal_quota),
                           ("borrowingLimit", r.borrowing_limit),
                           ("lendingLimit", r.lending_limit)):
            if value is None:
                continue
            try:
                amounts[key] = parse_quantity(value)
            except ValueError:
                yield SpecIssue(f"{at}.{key}", f"{value!r} is not a quantity: write e.g. "
                                "8, 64, 500m or 512Gi")
                continue
            if amounts[key] < 0:
                yield SpecIssue(f"{at}.{key}", "must be >= 0")
        if "lendingLimit" in amounts and "nominalQuota" in amounts \
                and amounts["lendingLimit"] > amounts["nominalQuota"]:
            yield SpecIssue(f"{at}.lendingLimit", "lends more than nominalQuota: use at most "
                            f"{r.nominal_quota}")
        if not has_cohort and (r.borrowing_limit is not None or r.lending_limit is not None):
            yield SpecIssue(f"{at}.borrowingLimit" if r.borrowing_limit is not None
                            else f"{at}.lendingLimit",
                            "borrowing and lending need a cohort: add `cohort:` (or "
                            "`parent:`) or drop the limit")


def _cohort_issues(cohorts: Sequence[Cohort], where: str) -> Iterator[SpecIssue]:
    for name in sorted(_dupes([c.name for c in cohorts])):
        yield SpecIssue(where, f"cohort name {name!r} is used more than once")
    parents = {c.name: c.parent for c in cohorts}
    for i, cohort in enumerate(cohorts):
        yield from _resource_issues(cohort.resources, f"{where}[{i}]",
                                    cohort.parent is not None)
        seen, at = [cohort.name], cohort.parent
        while at is not None:
            if at in seen:
                yield SpecIssue(f"{where}[{i}].parent", "the cohorts' parents form a cycle ("
                                + " -> ".join([*seen, at]) + "): a cohort tree has a root")
                break
            seen.append(at)
            at = parents.get(at)


def queue_issues(queues: Sequence[Queue], where: str = "scheduler.queues",
                 cohorts: Sequence[Cohort] = (),
                 cohorts_where: str = "scheduler.cohorts") -> Iterator[SpecIssue]:
    """The rules of a queue list and its cohorts (also `trainmaster simulate --queues`'
    file)."""
    yield from _cohort_issues(cohorts, cohorts_where)
    for name in sorted(_dupes([q.name for q in queues])):
        yield SpecIssue(where, f"queue name {name!r} is used more than once")
    for i, queue in enumerate(queues):
        path = f"{where}[{i}]"
        if queue.nominal_quota is not None and queue.gpu_quota is not None:
            yield SpecIssue(f"{path}.gpuQuota",
                            "set nominalQuota only (gpuQuota is its old name)")
        if queue.borrowing_limit is not None and queue.cohort is None:
            yield SpecIssue(f"{path}.borrowingLimit",
                            "borrowing needs a cohort: add `cohort: <name>` or drop it")
        if queue.lending_limit is not None and queue.cohort is None:
            yield SpecIssue(f"{path}.lendingLimit",
                            "lending needs a cohort: add `cohort: <name>` or drop it")
        if queue.lending_limit is not None and queue.quota is not None \
                and queue.lending_limit > queue.quota:
            yield SpecIssue(f"{path}.lendingLimit",
                            f"lends more than nominalQuota: use at most {queue.quota}")
        yield from _resource_issues(queue.resources, path, queue.cohort is not None)
        gpu_here = any(r.name == GPU_RESOURCE_NAME for r in queue.resources)
        if gpu_here and (queue.nominal_quota is not None or queue.gpu_quota is not None):
            yield SpecIssue(f"{path}.resources", "nvidia.com/gpu is set twice: drop it here "
                            "or drop nominalQuota")
        for k, klass in enumerate(queue.priority_classes):
            if klass.startswith("system-"):
                yield SpecIssue(f"{path}.priorityClasses[{k}]",
                                f"{klass!r} is a system class, the platform's own: list a "
                                "class of your cluster, or drop it")
        for klass in sorted(_dupes(list(queue.priority_classes))):
            yield SpecIssue(f"{path}.priorityClasses", f"{klass!r} is listed more than once")
        if queue.cohort is not None and queue.quota is None and not queue.resources:
            yield SpecIssue(f"{path}.cohort", "a queue in a cohort needs a nominalQuota "
                            "(an unlimited queue has nothing to lend)")


# --- cache ---------------------------------------------------------------------------


def cohort_root(parents: Mapping[str, str | None], cohort: str) -> str:
    """The top of a cohort's tree, given each cohort's parent (a loop in the parents,
    refused elsewhere, stops where it closes)."""
    seen = {cohort}
    while parents.get(cohort) is not None and parents[cohort] not in seen:
        cohort = parents[cohort] or cohort
        seen.add(cohort)
    return cohort


def queue_ceiling(queues: Sequence[Queue], name: str,
                  cohorts: Sequence[Cohort] = ()) -> int | None:
    """The most GPUs a queue can ever hold at once (None: no limit): its nominal quota, or
    in a cohort tree what it can borrow on top, up to its borrowing limit and the whole
    tree's nominal GPU quota (queues' and cohorts' own; an upper bound: the scheduler's
    ``QueueLedger.ceiling`` also applies the cohorts' limits)."""
    queue = next((q for q in queues if q.name == name), None)
    if queue is None or queue.quota is None:
        return None
    if queue.cohort is None:
        return queue.quota
    parents = {c.name: c.parent for c in cohorts}

    def root(cohort: str) -> str:
        return cohort_root(parents, cohort)

    mine = root(queue.cohort)
    total = sum(q.quota or 0 for q in queues if q.cohort is not None and root(q.cohort) == mine)
    for c in cohorts:
        if root(c.name) == mine:
            for r in c.resources:
                if r.name == GPU_RESOURCE_NAME:
                    with contextlib.suppress(ValueError):  # reported by _resource_issues
                        total += int(parse_quantity(r.nominal_quota))
    if queue.borrowing_limit is not None:
        total = min(total, queue.quota + queue.borrowing_limit)
    return max(queue.quota, total)


def _cache(spec: ClusterSpec) -> Iterator[SpecIssue]:
    cache = spec.cache
    if cache is None:
        return
    for name in sorted(_dupes([d.name for d in cache.datasets])):
        yield SpecIssue("cache.datasets", f"dataset name {name!r} is used more than once")
    schemes = ", ".join(f"{s}://" for s in DATASET_SCHEMES)
    for i, dataset in enumerate(cache.datasets):
        scheme = dataset.source.split("://", 1)[0]
        if scheme not in DATASET_SCHEMES:
            yield SpecIssue(
                f"cache.datasets[{i}].source",
                f"the {scheme}:// scheme is not supported; use one of {schemes} (another "
                "object store: its S3-compatible endpoint with s3:// and `endpoint`, a "
                "presigned https:// URL, or a volume that mounts the bucket with file://)")
        elif scheme != "s3":
            for key, value in (("credentialsSecret", dataset.credentials_secret),
                               ("endpoint", dataset.endpoint), ("region", dataset.region)):
                if value is not None:
                    yield SpecIssue(f"cache.datasets[{i}].{key}",
                                    f"only an s3:// source uses it, not "
                                    f"{dataset.source!r}: drop {key}")
        if dataset.volume is not None and not dataset.source.startswith("file:///"):
            yield SpecIssue(
                f"cache.datasets[{i}].volume",
                f"a volume holds a file:///path source, not {dataset.source!r}: "
                "make the source the path the volume is mounted at, or drop the volume")
    capacity = parse_bytes(cache.capacity)
    smallest = min(spec.nodes, key=lambda n: n.local_disk_bytes, default=None)
    if smallest is not None and capacity > smallest.local_disk_bytes:
        yield SpecIssue(
            "cache.capacity",
            f"{cache.capacity} is more than the "
            f"{smallest.local_disk} local disk of node {smallest.name}: use at "
            f"most {format_bytes(smallest.local_disk_bytes)}",
        )


# --- jobs ----------------------------------------------------------------------------


def _jobs(spec: ClusterSpec) -> Iterator[SpecIssue]:
    first: dict[str, int] = {}
    for i, job in enumerate(spec.jobs):  # reported at the duplicate, naming the first
        if job.name in first:
            yield SpecIssue(f"jobs[{i}].name", f"job name {job.name!r} is used more than "
                            f"once (first by jobs[{first[job.name]}]): job names must be unique")
        first.setdefault(job.name, i)
    capacity = DomainCapacity(spec.nodes, spec.topology.levels)
    for i, job in enumerate(spec.jobs):
        yield from check_job(spec, job, f"jobs[{i}]", capacity)


ELASTIC_REFUSED = {
    "deepspeed": "the deepspeed launcher starts a fixed --num_nodes and never re-rendezvouses "
                 "at another size",
}
"""Launchers an elastic job may not use, and why (docs/operator.md, "Elastic jobs and the
launchers")."""


def _elastic_range(job: Job, path: str) -> Iterator[SpecIssue]:
    """minNodes <= maxNodes, and `nodes` within the range (the schema checks each bound
    alone; these relate the fields)."""
    if job.elastic is None:
        return
    if job.launcher in ELASTIC_REFUSED:
        yield SpecIssue(f"{path}.elastic",
                        f"launcher {job.launcher!r} cannot run elastic: "
                        f"{ELASTIC_REFUSED[job.launcher]}; remove elastic, or run the same "
                        "script with launcher torchrun (torchrun's elastic agent; DeepSpeed "
                        "initializes from its environment)")
        return
    low, high = job.elastic.min_nodes, job.elastic.max_nodes
    if low > high:
        yield SpecIssue(f"{path}.elastic.minNodes",
                        f"minNodes {low} is more than maxNodes {high}: set minNodes <= maxNodes")
    elif not low <= job.nodes <= high:
        yield SpecIssue(f"{path}.nodes",
                        f"nodes {job.nodes} is outside elastic [{low}, {high}]: set nodes "
                        f"between minNodes and maxNodes")


def _container_restart(job: Job, path: str) -> Iterator[SpecIssue]:
    """`containerRestart: inPlace` only where torchrun's agents can take the container back
    and the kubelet may restart it whatever its exit code."""
    policy = job.restart_policy
    if policy.container_restart != "inPlace":
        return
    why = ("it needs launcher torchrun (its agents rendezvous with the restarted container)"
           if job.launcher != "torchrun" else
           "an elastic job's lost member gets a new pod from its Job instead"
           if job.elastic is not None else
           "the kubelet restarts a container whatever its exit code, so retryableExitCodes "
           "must be any" if policy.retryable_exit_codes != "any" else "")
    if why:
        yield SpecIssue(f"{path}.restartPolicy.containerRestart",
                        f"containerRestart inPlace: {why}; set containerRestart to gang")


def _checkpoint_mirror(spec: ClusterSpec, job: Job, path: str) -> Iterator[SpecIssue]:
    """A mirror travels over the storage network: the pods reach the S3 server through
    their `storage0`, which only a cluster with one gives them."""
    if job.checkpoint is None or job.checkpoint.mirror is None:
        return
    if spec.networks.storage is None:
        yield SpecIssue(f"{path}.checkpoint.mirror",
                        "checkpoints are mirrored over the storage network, and the cluster "
                        "has none: add networks.storage (its subnet), or drop mirror")


def check_job(
    spec: ClusterSpec, job: Job, path: str, capacity: DomainCapacity | None = None
) -> Iterator[SpecIssue]:
    """The checks of one job against its (already checked) cluster: queue, datasets, env,
    hyper-parameters, and that its pods fit the nodes and its topology."""
    yield from _elastic_range(job, path)
    yield from _container_restart(job, path)
    yield from _checkpoint_mirror(spec, job, path)
    queues = {q.name for q in spec.scheduler.queues}
    datasets = {d.name for d in spec.cache.datasets} if spec.cache else set()
    if job.queue not in queues and "queue" not in job.model_fields_set:
        # The user never wrote `default`: say that the job has no queue, not that a
        # queue they never named is missing.
        yield SpecIssue(
            f"{path}.queue",
            f"the job names no queue, so it would go to queue 'default', which "
            f"scheduler.queues does not declare: add `queue: <name>` to the job (one of "
            f"{', '.join(sorted(queues))}), or declare `{{name: default, nominalQuota: N}}` "
            f"in scheduler.queues",
        )
    elif job.queue not in queues:
        yield SpecIssue(
            f"{path}.queue",
            f"{job.queue!r} is not a queue: add it to "
            f"scheduler.queues or use one of {', '.join(sorted(queues))}",
        )
    else:
        cap = queue_ceiling(spec.scheduler.queues, job.queue, spec.scheduler.cohorts)
        gpus = job.nodes * job.gpus_per_pod
        if cap is not None and gpus > cap:
            # The scheduler's quota would hold this gang forever; the simulator refuses
            # it in the same words (trainmaster.simulate._queues.resolve).
            yield SpecIssue(
                f"{path}.queue",
                f"the job needs {gpus} GPUs, queue {job.queue!r} can never hold more than "
                f"{cap} (nominalQuota, cohort, borrowingLimit of scheduler.queues)",
            )
    for k, ds in enumerate(job.datasets):
        if ds not in datasets:
            where = "cache.datasets" if spec.cache else "a `cache:` section"
            yield SpecIssue(
                f"{path}.datasets[{k}]", f"{ds!r} is not a dataset: declare it in {where}"
            )
    for key in job.env:
        if not _ENV_NAME.match(key):
            yield SpecIssue(
                f"{path}.env.{key}",
                "is not a valid environment variable name: use letters, digits and _",
            )
        elif key.startswith("TRAINMASTER_"):
            yield SpecIssue(
                f"{path}.env.{key}", "TRAINMASTER_* variables are set by trainmaster: remove it"
            )
    for key in job.hyper_parameters:
        if not _HP_NAME.match(key):
            yield SpecIssue(
                f"{path}.hyperParameters.{key}",
                "names must start with a letter and hold only letters, digits and _",
            )
    yield from _job_fits(
        spec, job, path, capacity or DomainCapacity(spec.nodes, spec.topology.levels)
    )


def _job_fits(
    spec: ClusterSpec, job: Job, path: str, cap: DomainCapacity
) -> Iterator[SpecIssue]:
    if job.gpus_per_pod > cap.most_gpus:
        yield SpecIssue(
            f"{path}.gpusPerPod",
            f"{job.gpus_per_pod} is more than the {cap.most_gpus} GPUs per node",
        )
        return
    eligible = cap.eligible(job.gpus_per_pod)
    if job.cpu_per_pod is not None and job.cpu_per_pod > max(n.cpu for n in eligible):
        yield SpecIssue(
            f"{path}.cpuPerPod",
            f"{job.cpu_per_pod} is more than the {max(n.cpu for n in eligible)} cores per node",
        )
    if job.memory_per_pod is not None:
        biggest = max(n.memory_bytes for n in eligible)
        if parse_bytes(job.memory_per_pod) > biggest:
            yield SpecIssue(
                f"{path}.memoryPerPod",
                f"{job.memory_per_pod} is more than the {format_bytes(biggest)} memory per node",
            )
    if job.nodes > len(eligible):
        yield SpecIssue(
            f"{path}.nodes",
            f"{job.nodes} is more than the {len(eligible)} nodes "
            f"with at least {job.gpus_per_pod} GPUs in the cluster",
        )
        return
    domains = _domains(spec)
    rule = job_domain_rule(spec, job)
    rule_path = f"{path}.topology.domain" if job.topology else "scheduler.topologyPolicy"
    if rule.domain not in domains:
        if job.topology is not None:
            yield SpecIssue(
                rule_path,
                f"{rule.domain!r} is not a topology domain: use one of {', '.join(domains)}",
            )
        return
    if rule.mode != "required" or rule.domain == "cluster":
        return
    largest = cap.largest(job.gpus_per_pod, rule.domain) or 0
    if job.nodes > largest:
        yield SpecIssue(
            f"{path}.nodes",
            f"{job.nodes} nodes do not fit in one {rule.domain} "
            f"(the largest holds {largest} suitable nodes), which "
            f"{'its topology' if job.topology else 'scheduler.topologyPolicy'} "
            "requires: use mode `preferred` or a larger domain",
        )
