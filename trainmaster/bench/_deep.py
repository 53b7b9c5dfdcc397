"""`trainmaster bench scheduler --pending P`: the live scheduler with a deep queue.

trainmaster-scheduler on the benchmark's local control plane (kwok nodes), run twice in
one benchmark, each in a fresh namespace: with the wake-up index (``retryIndex: true``,
the default) and as the baseline before it, ``retryIndex: false`` (every queued gang
tried at every cycle, i.e. a full pass per event). The gangs are those of `bench queue`
(1-32 pods of 4 or 8 GPUs, required at node, leaf or spine or preferred), the same
draw for both runs. Per run, each step ending when no bind came for 8 s:

1. untimed: gangs holding half the cluster's GPUs (``first``) and gangs for the rest;
   then ``second``: gangs of the same shapes as ``first`` (pods, GPUs, topology), which
   wait.
2. **empty queue**: the pods of ``first`` are deleted at once (grace period 0); the
   scheduler places ``second`` (only gangs that fit the released half are queued).
3. untimed: ``P`` more gangs, far more than the cluster holds (the deep queue).
4. **deep queue**: the pods of ``second`` are deleted at once; the scheduler refills
   that half from the deep queue, which stays deep.

Both timed steps delete the same number of pods of the same shapes, so the deletions (the
API server's pace, which both steps follow) take the same time; ``second`` was a draw of
its own until 2026-12-06, and the deep step deleted 682 pods where the empty one deleted
642 for the same GPUs: 6% more time before the deep queue played any part. Both steps
start once the scheduler has no report write queued (its ``report_writes_queued`` gauge
at 0; ``_reports_drained``): the first-failure reports of ``P`` gangs arriving at once are
that submission's cost, not the deep queue's.

Figures per step: binds per second (pods bound / seconds from the delete call to the
last bind), the seconds to half and to 90% of those binds, and the scheduler's CPU per
cycle, p50 and p95, interpolated (as Prometheus' ``histogram_quantile``) from its own
``trainmaster_scheduler_cycle_cpu_seconds`` histogram, read before and after the phase.
A cycle answers every event (pod deleted, gang arriving, bind done) that arrived since
the last one, so CPU per cycle bounds
CPU per event from above.
"""

from __future__ import annotations

import asyncio
import math
import os
import random
import signal
import tempfile
import time
import uuid
from collections.abc import Callable, Mapping, Sequence
from dataclasses import asdict, dataclass, replace
from pathlib import Path
from typing import Any

from trainmaster.api import BENCH_LABEL, GPU_RESOURCE
from trainmaster.bench._cluster import bench_cluster
from trainmaster.bench._contenders import TRAINMASTER_SCHEDULER, RunContext, Trainmaster
from trainmaster.bench._errors import BenchError
from trainmaster.bench._kube import (
    create_all,
    create_namespace,
    delete_namespace,
    settled_kwok_nodes,
)
from trainmaster.bench._measure import BindWatcher
from trainmaster.bench._run import (
    BenchOptions,
    _gpus,
    _gpus_in_use,
    _interrupt,
    _load_average,
    _rdma_resources,
)
from trainmaster.bench._scheduler_metrics import (
    event_histogram,
    metrics_text,
    parse_metrics,
    quantile,
    report_backlog,
    scrape,
)
from trainmaster.bench._step_costs import (
    BENCH_PROCESS,
    CostMeter,
    StepCosts,
    step_pids,
)
from trainmaster.bench._workload import GangSpec, pod, pod_group
from trainmaster.cluster import cluster_sizing
from trainmaster.kubeclient import ApiError, Kube, pod_path, podgroup_path
from trainmaster.polling import WaitTimeout
from trainmaster.scheduler import pod_requests

Report = Callable[[str], None]
PHASE_LABEL = "bench-phase"
"""On the benchmark's own pods: which phase made them (``empty``, ``fill``, ``deep``)."""
_QUIET = 8.0
"""Seconds without a bind that end a phase (what was placeable is placed)."""


@dataclass(frozen=True, slots=True)
class DeepGang:
    name: str
    pods: int
    gpus: int
    level: str
    mode: str


def _draw(rng: random.Random, name: str) -> DeepGang:
    """One gang of the `bench queue` mix (its ``_gang``)."""
    pods = rng.choice((1, 1, 1, 2, 2, 4, 4, 8, 16, 32))
    gpus = rng.choice((4, 8))
    if pods == 1:
        level, mode = "node", "required"
    elif pods * gpus <= 20 * 8 and rng.random() < 0.5:
        level, mode = "leaf", "required"
    elif rng.random() < 0.5:
        level, mode = "spine", "required"
    else:
        level, mode = "leaf", "preferred"
    return DeepGang(name, pods, gpus, level, mode)


def deep_gangs(rng: random.Random, prefix: str, count: int) -> list[DeepGang]:
    return [_draw(rng, f"{prefix}{k:05d}") for k in range(count)]


def gangs_holding(rng: random.Random, prefix: str, gpus: int) -> list[DeepGang]:
    """Gangs of the mix until they hold ``gpus`` GPUs (the last one may go beyond)."""
    out: list[DeepGang] = []
    total = 0
    while total < gpus:
        out.append(_draw(rng, f"{prefix}{len(out):05d}"))
        total += out[-1].pods * out[-1].gpus
    return out


def same_shapes(gangs: Sequence[DeepGang], prefix: str) -> list[DeepGang]:
    """Gangs like ``gangs`` (pods, GPUs, topology), named ``<prefix><k>``."""
    return [replace(g, name=f"{prefix}{k:05d}") for k, g in enumerate(gangs)]


def _objects(gangs: Sequence[DeepGang], namespace: str, phase: str, scheduler: str,
             rdma: Sequence[str]) -> tuple[list[tuple[str, dict[str, Any]]],
                                           list[tuple[str, dict[str, Any]]]]:
    """(PodGroups, pods) for ``gangs``: the bench workload's objects with this mix's
    GPUs and topology."""
    groups, pods = [], []
    for gang in gangs:
        spec = GangSpec(gang.name, gang.pods)
        group = pod_group(spec, namespace)
        annotations = group["metadata"]["annotations"]
        for key in list(annotations):
            annotations[key] = gang.level if key.endswith("domain") else gang.mode
        groups.append((podgroup_path(namespace), group))
        for i in range(gang.pods):
            body = pod(spec, i, namespace, scheduler, rdma)
            body["metadata"]["labels"][PHASE_LABEL] = phase
            resources = body["spec"]["containers"][0]["resources"]
            for part in ("requests", "limits"):
                resources[part][GPU_RESOURCE] = str(gang.gpus)
            pods.append((pod_path(namespace), body))
    return groups, pods


@dataclass(frozen=True, slots=True)
class PhaseFigures:
    pods_bound: int
    seconds: float
    """From the step's start (the delete call) to its last bind."""
    binds_per_second: float
    gpus_bound: int
    gpus_per_second: float
    """The GPUs of the pods bound per second: pods are of 4 or 8 GPUs, so two steps that
    free the same GPUs can bind different numbers of pods; this figure does not depend
    on the draw's mix."""
    cycles: int
    cpu_ms_p50: float
    cpu_ms_p95: float
    """CPU per cycle: an upper bound of CPU per event (a cycle answers every event since
    the one before)."""
    event_cpu_ms_p50: float
    event_cpu_ms_p95: float
    """CPU per event: each step's cycle CPU shared among the events it answered."""
    waiting_gangs: int
    """Gangs waiting when the phase started (the scheduler's pending gauge)."""
    seconds_to_half: float
    seconds_to_90pct: float
    """From the step's start to the bind of half / 90% of the step's pods: where the
    binds of a step went slowly (its start, or a tail)."""
    report_writes_waited_s: float
    """Seconds waited before the step for the scheduler's queued report writes to drain
    (see ``_reports_drained``)."""
    costs: StepCosts
    """Where the step's time went: CPU by process, API server requests, deletions."""


def _ratio(deep: float, empty: float) -> float:
    return round(deep / empty, 3) if empty else 0.0


@dataclass(frozen=True, slots=True)
class DeepRun:
    variant: str
    retry_index: bool
    empty: PhaseFigures
    deep: PhaseFigures

    @property
    def binds_ratio(self) -> float:
        """Deep-queue binds per second / empty-queue binds per second."""
        return _ratio(self.deep.binds_per_second, self.empty.binds_per_second)

    @property
    def gpus_ratio(self) -> float:
        """Deep-queue GPUs bound per second / the empty queue's."""
        return _ratio(self.deep.gpus_per_second, self.empty.gpus_per_second)

    def to_json(self) -> dict[str, Any]:
        return {"variant": self.variant, "retry_index": self.retry_index,
                "empty": asdict(self.empty), "deep": asdict(self.deep),
                "binds_ratio": self.binds_ratio, "gpus_ratio": self.gpus_ratio}


@dataclass(frozen=True, slots=True)
class DeepResult:
    nodes: int
    pending: int
    seed: int
    runs: tuple[DeepRun, ...]
    load_average: tuple[float, float, float]

    def to_json(self) -> dict[str, Any]:
        return {"nodes": self.nodes, "pending": self.pending, "seed": self.seed,
                "load_average": list(self.load_average),
                "runs": [r.to_json() for r in self.runs]}


VARIANTS = (("wake-up index", True), ("full pass per event (retryIndex off)", False))


class _Scheduler(Trainmaster):
    """trainmaster-scheduler with ``retryIndex`` set; its metrics port is known."""

    def __init__(self, retry_index: bool) -> None:
        super().__init__()
        self.retry_index = retry_index
        self.metrics_port = 0

    def config(self, ctx: RunContext) -> dict[str, Any]:
        doc = super().config(ctx)
        doc["retryIndex"] = self.retry_index
        self.metrics_port = int(doc["metricsPort"])
        return doc


def seconds_to(share: float, times: Sequence[float], started: float) -> float:
    """Seconds from ``started`` until ``share`` of the binds in ``times`` were seen."""
    if not times:
        return 0.0
    return round(times[max(0, math.ceil(share * len(times)) - 1)] - started, 3)


async def _reports_drained(port: int, timeout: float) -> float:
    """Wait until the scheduler has no report write queued; the seconds it took.

    Why: 2,000 gangs arriving at once each get their pods' PodScheduled=False condition
    and an Event at their first failure: some 16,000 writes, which the scheduler lets
    out between binds for a minute or more. A step timed while they drain measures
    that submission's reports against the API server, not binding with a deep queue;
    the empty-queue step never has them. So both timed steps start with none queued."""
    started = time.monotonic()
    while report_backlog(await metrics_text(port)) > 0:
        if time.monotonic() - started > timeout:
            raise BenchError(f"the scheduler's report writes did not drain in {timeout:.0f}s")
        await asyncio.sleep(0.5)
    return round(time.monotonic() - started, 1)


async def _phase(api: Kube, namespace: str, port: int, act: Callable[[], Any],
                 report: Report, label: str, timeout: float, pids: Mapping[str, int],
                 drain: bool = False) -> PhaseFigures:
    """Run ``act`` (creates or deletes) and time the binds that follow until quiet;
    ``drain``: first wait for the scheduler's report writes (``_reports_drained``).
    ``pids``: the processes whose CPU the step's costs count (``_step_costs``)."""
    waited = await _reports_drained(port, timeout) if drain else 0.0
    text = await metrics_text(port)
    (before, waiting), events_before = parse_metrics(text), event_histogram(text)
    watcher = BindWatcher(api, namespace, 10**9)
    await watcher.start()
    bound_before = set(watcher.bound)
    meter = CostMeter(api, pids)
    started = await meter.start()
    try:
        await act()
        meter.act_done()
        await watcher.wait(timeout, _QUIET)
    finally:
        await watcher.stop()
    costs = await meter.finish(watcher.deleted_times)
    newly_bound = watcher.bound - bound_before
    gpus = await _gpus_of(api, namespace, newly_bound)
    text = await metrics_text(port)
    (after, _), events_after = parse_metrics(text), event_histogram(text)
    bound = len(newly_bound)
    last = watcher.last_at
    seconds = (last - started) if last is not None else 0.0
    cycles = int(after.get(math.inf, 0.0) - before.get(math.inf, 0.0))
    times = watcher.times[-bound:] if bound > 0 else []
    figures = PhaseFigures(
        pods_bound=bound, seconds=round(seconds, 3),
        binds_per_second=round(bound / seconds, 1) if seconds > 0 else 0.0,
        gpus_bound=gpus, gpus_per_second=round(gpus / seconds, 1) if seconds > 0 else 0.0,
        cycles=cycles,
        cpu_ms_p50=round(quantile(0.5, before, after) * 1000, 2),
        cpu_ms_p95=round(quantile(0.95, before, after) * 1000, 2),
        event_cpu_ms_p50=round(quantile(0.5, events_before, events_after) * 1000, 2),
        event_cpu_ms_p95=round(quantile(0.95, events_before, events_after) * 1000, 2),
        waiting_gangs=waiting,
        seconds_to_half=seconds_to(0.5, times, started),
        seconds_to_90pct=seconds_to(0.9, times, started),
        report_writes_waited_s=waited, costs=costs)
    report(f"{label}: {bound} pods ({gpus} GPUs) bound in {seconds:.1f}s (half in "
           f"{figures.seconds_to_half:.1f}s, 90% in {figures.seconds_to_90pct:.1f}s), "
           f"{cycles} cycles, CPU per cycle p50 {figures.cpu_ms_p50:.1f} ms p95 "
           f"{figures.cpu_ms_p95:.1f} ms, per event p50 {figures.event_cpu_ms_p50:.2f} ms "
           f"p95 {figures.event_cpu_ms_p95:.2f} ms" + (f"; {waited:.0f}s waited for report writes "
                                             "first" if drain else ""))
    if drain:
        report(f"{label}: {costs_line(costs)}")
    return figures


async def _gpus_of(api: Kube, namespace: str, uids: set[str]) -> int:
    """The GPUs requested by the namespace's pods whose uid is in ``uids`` (read after
    the step, outside its CPU window)."""
    if not uids:
        return 0
    page = await api.get(pod_path(namespace))
    return sum(pod_requests(p["spec"]).get(GPU_RESOURCE, 0) for p in page.get("items") or ()
               if p["metadata"].get("uid") in uids)


def costs_line(costs: StepCosts) -> str:
    """A timed step's deletions and CPU by process, for the progress lines."""
    cpu = ", ".join(f"{name} {used:.1f}" for name, used in costs.cpu_seconds.items())
    return (f"{costs.pods_deleted} pods deleted in {costs.seconds_to_last_deletion:.1f}s "
            f"({costs.pods_deleted_per_second:.0f}/s; delete call {costs.act_seconds:.1f}s), "
            f"load {costs.load_average_1m:.1f}; CPU s in {costs.window_seconds:.0f}s: "
            f"{cpu or 'no process readable'}")


async def deep_run(api: Kube, kubeconfig: Path, workdir: Path, gpus: int, pending: int,
                   seed: int, variant: str, retry_index: bool, rdma: Sequence[str],
                   bind_concurrency: int, timeout: float, report: Report) -> DeepRun:
    """One variant in a fresh namespace (see the module doc)."""
    namespace = f"bench-deep-{'index' if retry_index else 'full'}-{uuid.uuid4().hex[:5]}"
    rng = random.Random(seed)
    first = gangs_holding(rng, "a", gpus // 2)
    rest = gangs_holding(rng, "r", gpus - sum(g.pods * g.gpus for g in first))
    second = same_shapes(first, "b")
    deep = deep_gangs(rng, "d", pending)
    scheduler = _Scheduler(retry_index)
    name = scheduler.scheduler_name
    await create_namespace(api, namespace, {BENCH_LABEL: "true"})
    try:
        await scheduler.prepare(RunContext(kubeconfig, namespace, workdir, bind_concurrency))
        await scheduler.start()
        try:
            port = scheduler.metrics_port
            await scrape(port)
            report(f"{variant}: scheduler up in {namespace}")

            async def create(gangs: Sequence[DeepGang], phase: str) -> None:
                groups, pods = _objects(gangs, namespace, phase, name, rdma)
                await create_all(api, groups)
                await create_all(api, pods)

            async def release(phase: str) -> None:
                await api.request("DELETE", pod_path(namespace),
                                  params={"gracePeriodSeconds": "0",
                                          "labelSelector": f"{PHASE_LABEL}={phase}"})

            async def fill() -> None:
                await create(first, "first")
                await create(rest, "rest")

            async def nothing() -> None:
                pass

            own = {BENCH_PROCESS: os.getpid()}
            if scheduler.pid is not None:
                own[TRAINMASTER_SCHEDULER] = scheduler.pid
            pids = step_pids(kubeconfig, own)

            async def step(act: Callable[[], Any], label: str,
                           drain: bool = False) -> PhaseFigures:
                return await _phase(api, namespace, port, act, report, f"{variant}: {label}",
                                    timeout, pids, drain)

            await step(fill, "cluster filled")
            await step(lambda: create(second, "second"),
                       f"{len(second)} gangs for half the cluster queued")
            empty = await step(lambda: release("first"), "empty queue", drain=True)
            await step(lambda: create(deep, "deep"), f"{pending} more gangs queued")
            await step(nothing, "settled")
            deep_figures = await step(lambda: release("second"), "deep queue", drain=True)
        finally:
            await scheduler.stop()
    finally:
        report(f"{variant}: deleting {namespace}")
        await delete_namespace(api, namespace, 600.0)
    return DeepRun(variant, retry_index, empty, deep_figures)


async def _deep_bench(options: BenchOptions, kubeconfig: Path, report: Report) -> DeepResult:
    api = await Kube.connect(kubeconfig, pool=72)
    async with api:
        settle_limit = cluster_sizing(options.nodes).ready_timeout
        nodes = await settled_kwok_nodes(api, settle_limit, report)
        gpus = _gpus(nodes) - await _gpus_in_use(api, {n["metadata"]["name"] for n in nodes})
        if gpus <= 0:
            raise BenchError("the cluster's kwok nodes have no free GPU: delete the pods "
                             "that hold them")
        rdma = _rdma_resources(nodes)
        runs = []
        with tempfile.TemporaryDirectory(prefix="trainmaster-bench-deep-") as tmp:
            for variant, index in VARIANTS:
                runs.append(await deep_run(api, kubeconfig, Path(tmp), gpus, options.pending,
                                           options.seed, variant, index, rdma,
                                           options.bind_concurrency, options.timeout, report))
    return DeepResult(len(nodes), options.pending, options.seed, tuple(runs),
                      _load_average())


def run_deep_bench(options: BenchOptions, report: Report) -> DeepResult:
    """`bench scheduler --pending P` (module doc): a local cluster is started and
    stopped unless ``options.kubeconfig`` names one; SIGTERM is handled like Ctrl-C."""
    if options.nodes < 1 or options.pending < 1:
        raise BenchError("--nodes and --pending must be at least 1")
    previous = signal.signal(signal.SIGTERM, _interrupt)
    try:
        with bench_cluster(options.nodes, options.kubeconfig, report) as kubeconfig:
            try:
                return asyncio.run(_deep_bench(options, kubeconfig, report))
            except ApiError as err:
                raise BenchError(f"the API server call failed during the benchmark: {err}; "
                                 "retry on a quieter machine") from None
            except WaitTimeout as err:
                raise BenchError(f"{err}; the machine may be too busy for this size (load "
                                 f"average {os.getloadavg()[0]:.1f})") from None
    finally:
        signal.signal(signal.SIGTERM, previous)
