"""`trainmaster bench scheduler`: every contender alone on a fresh set of pending pods.

Before anything is timed: every node Ready and untainted, no node changing for 5 s (a
fresh cluster's nodes keep changing for about a minute), and one untimed warm-up round.
Per contender (in turn, for ``--repeat`` rounds): a new namespace; the PodGroups and pods
created concurrently and all seen pending; a watcher listening; then the clock starts
with the contender's process (the same point for every contender, see ``_contenders``)
and stops at the last bind (or a timeout, or a stall). The contender is stopped, the
final bindings are judged, and the namespace is deleted (its pods first, grace period
0) and waited for until it is gone, so the next one finds empty nodes and a quiet API
server. The order of the contenders rotates by one every round, so that none always
runs first (or right after the slowest one).
"""

from __future__ import annotations

import asyncio
import os
import re
import signal
import statistics
import tempfile
import time
import uuid
from collections.abc import Callable, Iterable, Sequence
from dataclasses import asdict, dataclass, replace
from pathlib import Path
from typing import Any

from trainmaster.api import BENCH_LABEL, WORKLOAD_API_VERSION
from trainmaster.bench._cluster import bench_cluster
from trainmaster.bench._contenders import (
    CONTENDERS,
    LIMIT,
    OPTIONAL_CONTENDERS,
    TRAINMASTER,
    Contender,
    RunContext,
    Trainmaster,
    make,
)
from trainmaster.bench._errors import BenchError
from trainmaster.bench._kube import (
    count_pods,
    create_all,
    create_namespace,
    delete_namespace,
    settled_kwok_nodes,
)
from trainmaster.bench._measure import BindWatcher, placement_quality
from trainmaster.bench._trees import checked_tree
from trainmaster.bench._workload import (
    GPUS_PER_POD,
    GangSpec,
    pod,
    pod_group,
    upstream_pod_group,
    workload,
)
from trainmaster.cluster import cluster_sizing
from trainmaster.kubeclient import ApiError, Kube, api_path, pod_path, podgroup_path
from trainmaster.polling import WaitTimeout
from trainmaster.scheduler import pod_requests

Report = Callable[[str], None]



_ACTIVE = "status.phase!=Succeeded,status.phase!=Failed"


@dataclass(frozen=True, slots=True)
class ContenderResult:
    scheduler: str
    seconds: float
    """From the process start to the last bind (the median over rounds)."""
    pods_per_second: float
    bound: int
    overcommitted_nodes: int
    gangs_split_beyond_needed: int
    first_bind_seconds: float = 0.0
    """From the process start to the first bind: start-up, sync and the first decision."""
    seconds_min: float = 0.0
    seconds_max: float = 0.0
    """The range of ``seconds`` over the rounds."""
    rounds: int = 1
    percent_of_limit: float | None = None
    """kube-scheduler-nodecisions' median time / this one's, in % (None if it did not run)."""
    rss_mb: float | None = None
    """The contender's own process (not the benchmark's): resident MiB (``VmRSS``) once
    every pod was bound, before it was stopped; the largest over the rounds. None if
    it had exited by then (bind-ceiling exits once it has bound every pod, so it
    may be gone)."""
    peak_rss_mb: float | None = None
    """The same process's peak resident MiB (``VmHWM``) up to that point."""


@dataclass(frozen=True, slots=True)
class BenchResult:
    nodes: int
    pods: int
    results: tuple[ContenderResult, ...]

    load_average: tuple[float, float, float] = (0.0, 0.0, 0.0)
    """The machine's load average (1, 5, 15 min) when the last round ended."""

    def to_json(self) -> dict[str, Any]:
        """Exactly the documented shape."""
        return {"nodes": self.nodes, "pods": self.pods,
                "load_average": list(self.load_average),
                "results": [asdict(r) for r in self.results]}


@dataclass(frozen=True, slots=True)
class BenchOptions:
    nodes: int = 500
    pods: int = 1000
    seed: int = 1
    only: tuple[str, ...] = ()
    kubeconfig: Path | None = None
    bind_concurrency: int = 64
    timeout: float = 600.0
    """Per contender: give up (and report what was bound) after this many seconds..."""
    stall: float = 120.0
    """... or after this many seconds without a single new bind."""
    repeat: int = 1
    """Rounds (every contender once per round, in turn); see ``combine``."""
    pending: int = 0
    """> 0: the deep-queue variant (``_deep``) with this many gangs waiting."""
    also_tree: Path | None = None
    """Also run trainmaster-scheduler from this checkout, as one more contender
    (``trainmaster@PATH``) in every round: before and after in one run (``_trees``)."""

    def contenders(self) -> tuple[str, ...]:
        known = CONTENDERS + OPTIONAL_CONTENDERS
        for name in self.only:
            if name not in known:
                raise BenchError(f"unknown scheduler {name!r}; choose from {', '.join(known)}")
        names = tuple(c for c in CONTENDERS if not self.only or c in self.only)
        names += tuple(c for c in OPTIONAL_CONTENDERS if c in self.only)
        if self.also_tree is not None:
            names += (f"{TRAINMASTER}@{checked_tree(self.also_tree)}",)
        return names


def _silent(_: str) -> None:
    pass


def _rdma_resources(nodes: Sequence[dict[str, Any]]) -> list[str]:
    """RDMA resources every node offers: the pods ask for one of each, like a job's."""
    common: set[str] | None = None
    for node in nodes:
        alloc = (node.get("status") or {}).get("allocatable") or {}
        have = {r for r in alloc if r.startswith("rdma/")}
        common = have if common is None else common & have
    return sorted(common or ())


def _gpus(nodes: Sequence[dict[str, Any]]) -> int:
    return sum(int(((n.get("status") or {}).get("allocatable") or {}).get("nvidia.com/gpu", 0))
               for n in nodes)


async def _gpus_in_use(api: Kube, nodes: set[str]) -> int:
    pods = await api.get(pod_path(), {"fieldSelector": _ACTIVE})
    return sum(pod_requests(p["spec"]).get("nvidia.com/gpu", 0) for p in pods["items"]
               if p["spec"].get("nodeName") in nodes)


async def _populate(api: Kube, namespace: str, gangs: Sequence[GangSpec],
                    scheduler: str, rdma: Sequence[str], affinity: bool = False,
                    upstream: bool = False) -> None:
    await create_namespace(api, namespace, {BENCH_LABEL: "true"})
    groups = ([(upstream_podgroup_path(namespace), upstream_pod_group(g, namespace))
               for g in gangs] if upstream else
              [(podgroup_path(namespace), pod_group(g, namespace)) for g in gangs])
    await create_all(api, groups)
    pods = [(pod_path(namespace), pod(g, i, namespace, scheduler, rdma, affinity, upstream))
            for g in gangs for i in range(g.size)]
    await create_all(api, pods)


def upstream_podgroup_path(namespace: str) -> str:
    return api_path(WORKLOAD_API_VERSION, "podgroups", namespace)


def bench_namespace(contender: str) -> str:
    """A fresh namespace for one contender's round. Its name may be
    `trainmaster@/path/to/tree` (--also-tree), and a namespace is an RFC 1123 label: every
    other character becomes '-', and the whole stays within 63."""
    label = re.sub(r"[^a-z0-9-]+", "-", contender.lower()).strip("-")[:48]
    return f"bench-{label}-{uuid.uuid4().hex[:5]}"


async def _one(api: Kube, contender: Contender, options: BenchOptions, kubeconfig: Path,
               workdir: Path, gangs: Sequence[GangSpec], rdma: Sequence[str],
               report: Report) -> ContenderResult:
    name = contender.name
    namespace = bench_namespace(name)
    total = sum(g.size for g in gangs)
    report(f"{name}: creating {len(gangs)} PodGroups and {total} pending pods in {namespace}")
    await _populate(api, namespace, gangs, contender.scheduler_name, rdma,
                    contender.pod_affinity, contender.upstream_groups)
    try:
        if await count_pods(api, namespace) != total:
            raise RuntimeError(f"{namespace}: not every pod was created")
        ctx = RunContext(kubeconfig, namespace, workdir, options.bind_concurrency)
        await contender.prepare(ctx)
        watcher = BindWatcher(api, namespace, total)
        await watcher.start()
        if watcher.bound:
            await contender.stop()
            await watcher.stop()
            raise BenchError(
                f"{len(watcher.bound)} pods of {namespace} were bound before {name} started: "
                f"another scheduler ({contender.scheduler_name}) runs on this cluster"
            )
        report(f"{name}: started")
        memory = None
        started = time.monotonic()
        try:
            await contender.start()
            outcome = await watcher.wait(options.timeout, options.stall)
            if outcome:
                report(f"{name}: gave up: {outcome}")
            ended = watcher.finished_at or time.monotonic()
            # After it placed everything, while it still holds its caches.
            memory = contender.memory()
        finally:
            await contender.stop()
            await watcher.stop()
        seconds = ended - started
        first = (watcher.first_at or ended) - started
        quality = await placement_quality(api, namespace)
        held = "" if memory is None else (f", RSS {memory.rss_mb:.0f} MiB (peak "
                                          f"{memory.peak_rss_mb:.0f})")
        report(f"{name}: {quality.bound}/{total} bound in {seconds:.2f}s{held}")
        return ContenderResult(
            scheduler=name,
            seconds=round(seconds, 3),
            pods_per_second=round(quality.bound / seconds, 1) if seconds > 0 else 0.0,
            bound=quality.bound,
            overcommitted_nodes=quality.overcommitted_nodes,
            gangs_split_beyond_needed=quality.gangs_split_beyond_needed,
            first_bind_seconds=round(first, 3),
            seconds_min=round(seconds, 3),
            seconds_max=round(seconds, 3),
            rss_mb=None if memory is None else memory.rss_mb,
            peak_rss_mb=None if memory is None else memory.peak_rss_mb,
        )
    finally:
        report(f"{name}: deleting {namespace}")
        # 10,000 pods take minutes to go on a loaded machine; 180 s suits 1000.
        await delete_namespace(api, namespace, max(180.0, total * 0.05))


async def _warm_up(api: Kube, rdma: Sequence[str], report: Report) -> None:
    """One untimed round of create, bind, run (kwok) and delete, so that the first
    contender does not pay for a cold API server (watch caches, first serialisations)."""
    from trainmaster.bench._ceiling import bind_all

    namespace = f"bench-warm-up-{uuid.uuid4().hex[:5]}"
    gangs = workload(100, seed=0)
    report(f"warm-up: 100 pods in {namespace}")
    await _populate(api, namespace, gangs, "bench-warm-up", rdma)
    try:
        watcher = BindWatcher(api, namespace, 100)
        await watcher.start()
        await bind_all(api, namespace, "bench-warm-up", 16)
        await watcher.wait(60, 30)
        await watcher.stop()
    finally:
        await delete_namespace(api, namespace)


async def _bench(options: BenchOptions, kubeconfig: Path, report: Report) -> BenchResult:
    names = options.contenders()
    gangs = workload(options.pods, options.seed)
    api = await Kube.connect(kubeconfig, pool=72)
    async with api:
        # The controller manager lifts not-ready taints at a rate, not all at once: the
        # wait grows with the cluster as `cluster up`'s Ready wait does (400 s at 5000).
        settle_limit = cluster_sizing(options.nodes).ready_timeout
        nodes = await settled_kwok_nodes(api, settle_limit, report)
        gpus = _gpus(nodes) - await _gpus_in_use(api, {n["metadata"]["name"] for n in nodes})
        if options.pods * GPUS_PER_POD > gpus:
            raise BenchError(f"{options.pods} pods of {GPUS_PER_POD} GPUs do not fit the "
                             f"{gpus} free GPUs of the cluster's kwok nodes: use fewer --pods "
                             "or more --nodes, or delete the pods that hold them")
        rdma = _rdma_resources(nodes)
        await _warm_up(api, rdma, report)
        rounds: dict[str, list[ContenderResult]] = {name: [] for name in names}
        with tempfile.TemporaryDirectory(prefix="trainmaster-bench-run-") as tmp:
            for round_ in range(options.repeat):
                order = rotated(names, round_)
                if options.repeat > 1:
                    report(f"round {round_ + 1} of {options.repeat}: {', '.join(order)}")
                for name in order:
                    contender = (make(name) if "@" not in name
                                 else Trainmaster(Path(name.partition("@")[2])))
                    rounds[name].append(await _one(api, contender, options, kubeconfig,
                                                   Path(tmp), gangs, rdma, report))
    rows = with_percent_of_limit([combine(runs) for runs in rounds.values()])
    return BenchResult(len(nodes), options.pods, tuple(rows), _load_average())


def rotated(names: Sequence[str], round_: int) -> tuple[str, ...]:
    """The order of round ``round_``: the first contender of the last round goes last."""
    if not names:
        return ()
    shift = round_ % len(names)
    return tuple(names[shift:]) + tuple(names[:shift])


def _load_average() -> tuple[float, float, float]:
    one, five, fifteen = os.getloadavg()
    return round(one, 2), round(five, 2), round(fifteen, 2)


def combine(runs: Sequence[ContenderResult]) -> ContenderResult:
    """One row from several rounds: the median time (and its range), and the worst of the
    placement figures (fewest bound, most overcommitted nodes, most split gangs)."""
    seconds = statistics.median(r.seconds for r in runs)
    bound = min(r.bound for r in runs)
    return ContenderResult(
        scheduler=runs[0].scheduler,
        seconds=round(seconds, 3),
        pods_per_second=round(bound / seconds, 1) if seconds > 0 else 0.0,
        bound=bound,
        overcommitted_nodes=max(r.overcommitted_nodes for r in runs),
        gangs_split_beyond_needed=max(r.gangs_split_beyond_needed for r in runs),
        first_bind_seconds=round(statistics.median(r.first_bind_seconds for r in runs), 3),
        seconds_min=min(r.seconds for r in runs),
        seconds_max=max(r.seconds for r in runs),
        rounds=len(runs),
        rss_mb=_largest(r.rss_mb for r in runs),
        peak_rss_mb=_largest(r.peak_rss_mb for r in runs),
    )


def _largest(values: Iterable[float | None]) -> float | None:
    known = [v for v in values if v is not None]
    return max(known) if known else None


def with_percent_of_limit(rows: Sequence[ContenderResult]) -> list[ContenderResult]:
    """Each row's speed as % of kube-scheduler-nodecisions' (time ratio, medians)."""
    limit = next((r for r in rows if r.scheduler == LIMIT), None)
    if limit is None or limit.bound == 0:
        return list(rows)
    out = []
    for row in rows:
        percent = None
        if row.seconds > 0 and row.bound == limit.bound:
            percent = round(100.0 * limit.seconds / row.seconds, 1)
        out.append(replace(row, percent_of_limit=percent))
    return out


def _interrupt(signum: int, frame: object) -> None:
    os.kill(os.getpid(), signal.SIGINT)


def run_scheduler_bench(options: BenchOptions, report: Report = _silent) -> BenchResult:
    """Run the benchmark (starting and stopping a local cluster unless given one).

    SIGTERM is handled like Ctrl-C, so that the contender processes and the cluster are
    stopped on the way out rather than orphaned."""
    previous = signal.signal(signal.SIGTERM, _interrupt)
    try:
        return _run_scheduler_bench(options, report)
    finally:
        signal.signal(signal.SIGTERM, previous)


def _run_scheduler_bench(options: BenchOptions, report: Report) -> BenchResult:
    options.contenders()  # fail on a bad --only before starting anything
    if options.nodes < 1 or options.pods < 1 or options.repeat < 1:
        raise BenchError("--nodes, --pods and --repeat must be at least 1")
    if options.kubeconfig is None and options.pods * GPUS_PER_POD > options.nodes * 8:
        raise BenchError(f"{options.pods} pods of {GPUS_PER_POD} GPUs do not fit on "
                         f"{options.nodes} nodes of 8 GPUs")
    with bench_cluster(options.nodes, options.kubeconfig, report) as kubeconfig:
        try:
            return asyncio.run(_bench(options, kubeconfig, report))
        except ApiError as err:  # a clear error, not a traceback (the cluster still stops)
            raise BenchError(f"the API server call failed during the benchmark: {err}; "
                             "see the control plane's logs or retry on a quieter "
                             "machine") from None
        except WaitTimeout as err:  # the same for a wait that ran out (a loaded machine)
            raise BenchError(f"{err}; the machine may be too busy for this size (load "
                             f"average {os.getloadavg()[0]:.1f}): retry on a quieter "
                             "machine, or with fewer --nodes") from None
