"""`trainmaster bench failover`: two trainmaster-scheduler replicas on one Lease; time the
hand-over from the leader's stop to the standby's first Binding.

Procedure, on the bench's own kwok cluster (``_cluster``), after the same settle wait and
warm-up as `bench scheduler`:

1. A fresh namespace with the workload's PodGroups and P pending pods.
2. **Cold start.** Replica ``a`` is spawned (the clock starts just before the spawn, as
   for `bench scheduler`); once the Lease names it, replica ``b`` is spawned as its
   standby. ``cold_first_bind_seconds`` is ``a``'s spawn to the first pod seen bound.
3. **SIGTERM.** A second standby ``c`` is spawned once ``b`` is synced; as soon as ``c``
   logs that its cache is synced too (each lists, watches and builds its state while it
   waits for the Lease) and pods are still pending, ``a`` gets SIGTERM: it finishes its
   in-flight binds and releases the Lease, which one of ``b`` and ``c`` takes.
4. **SIGKILL.** Right after that standby's first bind, it (now the leader) gets SIGKILL:
   nothing is released, so the other standby waits for the lease to expire
   (``lease_duration_seconds``) before it may bind. Both standbys are synced before the
   first stop, so work is still pending for the second hand-over.

Which bind is the new leader's: every object write gets the next etcd revision, so a
bind whose pod ``resourceVersion`` is above that of the Lease write naming the new
holder came after the hand-over; the old leader had finished (SIGTERM) or was dead
(SIGKILL) before that write could succeed. Each hand-over is timed from the signal to
the Lease stored with the new holder and to the first Binding stored after it, by the
API server's audit log on the bench's own cluster (``_audit.py``: ``stageTimestamp``s
against the signal's ``time.time()``, one host, one clock). On a cluster given with
``--kubeconfig`` there is no audit log: the Lease as the benchmark's watch saw it, and
the Unix time the new leader logs for its first bind's answer (``first pod bound at``).
``first_bind_seen_seconds`` is the first bind as the benchmark's watch of the pods sees
it, which lags: right after a burst of binds the pod stream ran 2 s behind the Lease's
at 5,000 nodes, so it is reported beside, not as, the hand-over.
"""

from __future__ import annotations

import asyncio
import contextlib
import os
import re
import signal
import sys
import tempfile
import time
import uuid
from collections.abc import Callable
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import Any

import yaml

from trainmaster import polling
from trainmaster.bench._audit import AuditLog
from trainmaster.bench._cluster import bench_cluster
from trainmaster.bench._contenders import RunContext, Trainmaster, _Process
from trainmaster.bench._errors import BenchError
from trainmaster.bench._kube import (
    count_pods,
    delete_namespace,
    settled_kwok_nodes,
)
from trainmaster.bench._run import _load_average, _populate, _rdma_resources, _warm_up
from trainmaster.bench._workload import GPUS_PER_POD, workload
from trainmaster.cluster import cluster_sizing
from trainmaster.kubeclient import GONE, ApiError, Kube, pod_path
from trainmaster.polling import WaitTimeout
from trainmaster.scheduler import SchedulerConfig

Report = Callable[[str], None]

LEASE = "trainmaster-scheduler"
SYNCED = b"cache synced"
"""What a replica logs (INFO) once it has listed, built its state and started watching."""


@dataclass(frozen=True, slots=True)
class FailoverOptions:
    nodes: int = 500
    pods: int = 1000
    seed: int = 1
    kubeconfig: Path | None = None
    bind_concurrency: int = 64
    client_qps: float = 5000.0
    """Of both replicas. Lower it only so that a small cluster still has pods pending
    when the standby is ready (the hand-over needs work left to do)."""
    timeout: float = 300.0
    """For each wait: a replica synced, a first bind, a hand-over."""


@dataclass(frozen=True, slots=True)
class Handover:
    signal: str
    pending_at_stop: int
    """Pods of the namespace not yet bound when the leader was signalled."""
    lease_seconds: float
    """From the signal to the Lease naming the standby: stored, by the audit log (on a
    ``--kubeconfig`` cluster: seen by the benchmark's watch)."""
    first_bind_seconds: float
    """From the signal to the new leader's first Binding: stored, by the audit log (on a
    ``--kubeconfig`` cluster: the answer time the new leader logs)."""
    first_bind_seen_seconds: float
    """From the signal to that leader's first bind seen by the benchmark's pod watch."""
    leader_rss_mb: float | None = None
    """The signalled leader's own resident MiB (``VmRSS``) just before the signal: a
    trainmaster-scheduler process holding the whole cluster's state."""
    leader_peak_rss_mb: float | None = None
    """Its ``VmHWM``: the most it was resident up to then."""


@dataclass(frozen=True, slots=True)
class FailoverResult:
    nodes: int
    pods: int
    cold_first_bind_seconds: float
    """One replica, from its process start to its first bind (the standby is spawned
    once it leads)."""
    handovers: tuple[Handover, ...]
    lease_duration_seconds: float
    retry_period_seconds: float
    load_average: tuple[float, float, float] = (0.0, 0.0, 0.0)

    def to_json(self) -> dict[str, Any]:
        return {"nodes": self.nodes, "pods": self.pods,
                "cold_first_bind_seconds": self.cold_first_bind_seconds,
                "lease_duration_seconds": self.lease_duration_seconds,
                "retry_period_seconds": self.retry_period_seconds,
                "load_average": list(self.load_average),
                "handovers": [asdict(h) for h in self.handovers]}


def lease_path(namespace: str) -> str:
    return f"/apis/coordination.k8s.io/v1/namespaces/{namespace}/leases"


def _rv(obj: dict[str, Any]) -> int:
    return int((obj.get("metadata") or {}).get("resourceVersion") or 0)


class _Observer:
    """Watches the namespace's pods (binds with their resource versions) and its Lease
    (holders with theirs), stamping each on this process's monotonic clock."""

    def __init__(self, api: Kube, namespace: str) -> None:
        self._api = api
        self._namespace = namespace
        self.binds: list[tuple[float, int]] = []
        self._bound: set[str] = set()
        self.holders: list[tuple[float, int, str]] = []
        self.changed = asyncio.Event()
        self._tasks: list[asyncio.Task[None]] = []

    @property
    def bound(self) -> int:
        return len(self._bound)

    def holder(self) -> str:
        return self.holders[-1][2] if self.holders else ""

    async def start(self) -> None:
        pods = pod_path(self._namespace)
        leases = lease_path(self._namespace)
        for path, params, see in ((pods, {}, self._see_pod),
                                  (leases, {"fieldSelector": f"metadata.name={LEASE}"},
                                   self._see_lease)):
            page = await self._api.get(path, params)
            for obj in page.get("items") or ():
                see(obj)
            rv = str((page.get("metadata") or {}).get("resourceVersion", ""))
            self._tasks.append(asyncio.create_task(self._follow(path, params, rv, see)))

    def _see_pod(self, obj: dict[str, Any]) -> None:
        uid = str((obj.get("metadata") or {}).get("uid"))
        if (obj.get("spec") or {}).get("nodeName") and uid not in self._bound:
            self._bound.add(uid)
            self.binds.append((time.monotonic(), _rv(obj)))
            self.changed.set()

    def _see_lease(self, obj: dict[str, Any]) -> None:
        holder = str((obj.get("spec") or {}).get("holderIdentity") or "")
        if not self.holders or self.holders[-1][2] != holder:
            self.holders.append((time.monotonic(), _rv(obj), holder))
            self.changed.set()

    async def _follow(self, path: str, params: dict[str, str], rv: str,
                      see: Callable[[dict[str, Any]], None]) -> None:
        while True:
            try:
                async for kind, obj in self._api.watch(path, {**params, "resourceVersion": rv}):
                    rv = str((obj.get("metadata") or {}).get("resourceVersion", rv))
                    if kind in ("ADDED", "MODIFIED"):
                        see(obj)
            except ApiError as err:
                if err.status != GONE:
                    await asyncio.sleep(0.1)
                    continue
                page = await self._api.get(path, params)  # relist: still sees every bind
                for obj in page.get("items") or ():
                    see(obj)
                rv = str((page.get("metadata") or {}).get("resourceVersion", ""))

    async def until(self, test: Callable[[], bool], what: str, timeout: float) -> None:
        deadline = time.monotonic() + timeout
        while not test():
            left = deadline - time.monotonic()
            if left <= 0:
                raise BenchError(f"timed out after {timeout:.0f}s waiting for {what}")
            self.changed.clear()
            await polling.wait_event(self.changed, min(left, 0.05))

    async def stop(self) -> None:
        for task in self._tasks:
            task.cancel()
        for task in self._tasks:
            with contextlib.suppress(asyncio.CancelledError):
                await task


class _Replica:
    def __init__(self, identity: str, ctx: RunContext) -> None:
        self.identity = identity
        self.log = ctx.workdir / f"replica-{identity}.log"
        # Its own file: each replica needs its own metrics port (Trainmaster.config
        # picks a free one per call).
        config = ctx.workdir / f"replica-{identity}.yaml"
        config.write_text(yaml.safe_dump(Trainmaster().config(ctx), sort_keys=False))
        kubeconfig = ctx.kubeconfig
        self.process = _Process(
            [sys.executable, "-m", "trainmaster.scheduler.cli", "--config", str(config),
             "--kubeconfig", str(kubeconfig), "--identity", identity, "--log-level", "INFO"],
            self.log)

    def spawn(self) -> None:
        self.log.unlink(missing_ok=True)
        self.process.spawn()

    def tail(self, lines: int = 5) -> str:
        """The end of its log, for an error message (the log goes with the run)."""
        try:
            return "\n".join(self.log.read_text(errors="replace").splitlines()[-lines:])
        except OSError:
            return "(no log)"

    def synced(self) -> bool:
        try:
            return SYNCED in self.log.read_bytes()
        except OSError:
            return False

    def signal(self, sig: signal.Signals) -> None:
        proc = self.process.proc
        if proc is None or proc.poll() is not None:
            raise BenchError(f"replica {self.identity} exited early; its log ends:\n"
                             f"{self.tail()}")
        os.killpg(proc.pid, sig)

    async def stop(self) -> None:
        await self.process.stop()


async def _synced(replica: _Replica, timeout: float) -> None:
    deadline = time.monotonic() + timeout
    while not replica.synced():
        proc = replica.process.proc
        if proc is None or proc.poll() is not None:
            raise BenchError(f"replica {replica.identity} exited before its cache synced; "
                             f"its log ends:\n{replica.tail()}")
        if time.monotonic() > deadline:
            raise BenchError(f"replica {replica.identity} not synced after {timeout:.0f}s")
        await asyncio.sleep(0.05)


_FIRST_BOUND = re.compile(rb"first pod bound at (\d+\.\d+)")


async def _first_bound_at(replica: _Replica, timeout: float) -> float:
    """The Unix time of the replica's first bind, from its log."""
    deadline = time.monotonic() + timeout
    while True:
        with contextlib.suppress(OSError):
            found = _FIRST_BOUND.search(replica.log.read_bytes())
            if found is not None:
                return float(found.group(1))
        if time.monotonic() > deadline:
            raise BenchError(f"replica {replica.identity} logged no first bind after "
                             f"{timeout:.0f}s; its log ends:\n{replica.tail()}")
        await asyncio.sleep(0.05)


@dataclass(frozen=True, slots=True)
class _ApiClock:
    """When the API server stored a Lease write and a replica's first Binding: from its
    audit log on the bench's own cluster, else from the replica's log (a user's cluster:
    the Lease as the benchmark's watch saw it)."""

    audit: AuditLog | None
    namespace: str
    timeout: float

    async def _wait(self, find: Callable[[], float | None], what: str) -> float:
        deadline = time.monotonic() + self.timeout
        while (found := find()) is None:
            if time.monotonic() > deadline:
                raise BenchError(f"the API server's audit log shows no {what} after "
                                 f"{self.timeout:.0f}s")
            await asyncio.sleep(0.05)
        return found

    async def lease_taken(self, holder: str, after: float, seen: float) -> float:
        if self.audit is None:
            return seen
        audit = self.audit
        return await self._wait(lambda: audit.lease_taken(holder, self.namespace, after),
                                f"Lease write naming {holder}")

    async def first_bind(self, replica: _Replica, after: float) -> float:
        if self.audit is None:
            return await _first_bound_at(replica, self.timeout)
        audit = self.audit
        return await self._wait(lambda: audit.first_bind(self.namespace, after),
                                f"Binding by {replica.identity}")


async def _handover(observer: _Observer, leader: _Replica, standbys: list[_Replica],
                    sig: signal.Signals, total: int, timeout: float, clock: _ApiClock,
                    ) -> tuple[Handover, _Replica]:
    """Signal ``leader``; time until one of ``standbys`` holds the Lease and binds."""
    if observer.bound >= total:
        raise BenchError("every pod was bound before the standbys were ready: nothing left "
                         "for a hand-over; use more --pods or a lower --client-qps")
    names = {r.identity: r for r in standbys}
    pending = total - observer.bound
    memory = leader.process.memory()
    stopped, stopped_wall = time.monotonic(), time.time()
    leader.signal(sig)
    await observer.until(lambda: observer.holder() in names,
                         f"the Lease to name one of {', '.join(names)}", timeout)
    taken_at, lease_rv, holder = observer.holders[-1]

    def first() -> float | None:
        return next((t for t, rv in observer.binds if rv > lease_rv), None)

    await observer.until(lambda: first() is not None or observer.bound >= total,
                         f"{holder}'s first bind", timeout)
    bind_at = first()
    if bind_at is None:
        raise BenchError(f"the pods were all bound before {holder} led (the old leader "
                         "finished them as it stopped); use more --pods")
    lease_at = await clock.lease_taken(holder, stopped_wall,
                                       stopped_wall + (taken_at - stopped))
    bound_at = await clock.first_bind(names[holder], lease_at)
    return (Handover(sig.name, pending, round(lease_at - stopped_wall, 3),
                     round(bound_at - stopped_wall, 3), round(bind_at - stopped, 3),
                     None if memory is None else memory.rss_mb,
                     None if memory is None else memory.peak_rss_mb), names[holder])


async def _measure(api: Kube, options: FailoverOptions, kubeconfig: Path, workdir: Path,
                   namespace: str, audit: AuditLog | None, report: Report,
                   ) -> tuple[float, list[Handover], Any]:
    ctx = RunContext(kubeconfig, namespace, workdir, options.bind_concurrency,
                     options.client_qps)
    # The bench config leaves the election timings at their defaults.
    election = SchedulerConfig().leader_election
    total = options.pods
    a, b, c = _Replica("a", ctx), _Replica("b", ctx), _Replica("c", ctx)
    observer = _Observer(api, namespace)
    clock = _ApiClock(audit, namespace, options.timeout)
    await observer.start()
    if observer.bound:
        raise BenchError(f"pods of {namespace} were bound before the replicas started: "
                         "another trainmaster-scheduler runs on this cluster")
    handovers = []
    try:
        started_wall = time.time()
        a.spawn()
        await observer.until(lambda: observer.holder() == "a", "replica a to lead",
                             options.timeout)
        b.spawn()
        report("a leads; b started as its standby")
        await observer.until(lambda: bool(observer.binds), "the first bind", options.timeout)
        cold = await clock.first_bind(a, started_wall) - started_wall
        report(f"a: first bind {cold:.2f}s after its process start")
        # Both standbys synced before the first stop, so work is left for the second.
        await _synced(b, options.timeout)
        c.spawn()
        await _synced(c, options.timeout)
        report(f"b and c synced; SIGTERM to a with {total - observer.bound} pods pending")
        term, leader = await _handover(observer, a, [b, c], signal.SIGTERM, total,
                                       options.timeout, clock)
        handovers.append(term)
        report(f"SIGTERM hand-over: Lease to {leader.identity} {term.lease_seconds:.2f}s, "
               f"first bind {term.first_bind_seconds:.2f}s")
        standby = c if leader is b else b
        report(f"SIGKILL to {leader.identity} with {total - observer.bound} pods pending")
        kill, _ = await _handover(observer, leader, [standby], signal.SIGKILL, total,
                                  election.lease_duration + options.timeout, clock)
        handovers.append(kill)
        report(f"SIGKILL hand-over: Lease to {standby.identity} {kill.lease_seconds:.2f}s, "
               f"first bind {kill.first_bind_seconds:.2f}s")
    finally:
        for replica in (a, b, c):
            await replica.stop()
        await observer.stop()
    return round(cold, 3), handovers, election


async def _bench(options: FailoverOptions, kubeconfig: Path, audit: AuditLog | None,
                 report: Report) -> FailoverResult:
    gangs = workload(options.pods, options.seed)
    api = await Kube.connect(kubeconfig, pool=72)
    async with api:
        settle_limit = cluster_sizing(options.nodes).ready_timeout
        nodes = await settled_kwok_nodes(api, settle_limit, report)
        rdma = _rdma_resources(nodes)
        await _warm_up(api, rdma, report)
        namespace = f"bench-failover-{uuid.uuid4().hex[:5]}"
        report(f"creating {len(gangs)} PodGroups and {options.pods} pending pods in {namespace}")
        await _populate(api, namespace, gangs, Trainmaster.scheduler_name, rdma)
        try:
            if await count_pods(api, namespace) != options.pods:
                raise BenchError(f"{namespace}: not every pod was created")
            with tempfile.TemporaryDirectory(prefix="trainmaster-bench-failover-") as tmp:
                cold, handovers, election = await _measure(api, options, kubeconfig,
                                                           Path(tmp), namespace, audit,
                                                           report)
        finally:
            # On the bench's own cluster, stopping it removes everything at once; deleting
            # 10,000 pods first took minutes on a loaded machine.
            if options.kubeconfig is not None:
                report(f"deleting {namespace}")
                await delete_namespace(api, namespace, max(180.0, options.pods * 0.05))
    return FailoverResult(len(nodes), options.pods, cold, tuple(handovers),
                          election.lease_duration, election.retry_period, _load_average())


def _interrupt(signum: int, frame: object) -> None:
    os.kill(os.getpid(), signal.SIGINT)


def _silent(_: str) -> None:
    pass


def run_failover_bench(options: FailoverOptions, report: Report = _silent) -> FailoverResult:
    """Run the benchmark (starting and stopping a local cluster unless given one); SIGTERM
    is handled like Ctrl-C so the replicas and the cluster are stopped on the way out."""
    if options.nodes < 1 or options.pods < 1:
        raise BenchError("--nodes and --pods must be at least 1")
    if options.client_qps <= 0:
        raise BenchError("--client-qps must be above 0")
    if options.kubeconfig is None and options.pods * GPUS_PER_POD > options.nodes * 8:
        raise BenchError(f"{options.pods} pods of {GPUS_PER_POD} GPUs do not fit on "
                         f"{options.nodes} nodes of 8 GPUs")
    previous = signal.signal(signal.SIGTERM, _interrupt)
    try:
        with contextlib.ExitStack() as stack:
            audit: AuditLog | None = None
            flags: list[str] = []
            if options.kubeconfig is None:  # our own cluster: its API server's audit log
                folder = Path(stack.enter_context(tempfile.TemporaryDirectory(
                    prefix="trainmaster-bench-audit-")))
                audit, flags = AuditLog.prepare(folder)
            kubeconfig = stack.enter_context(
                bench_cluster(options.nodes, options.kubeconfig, report, flags))
            try:
                return asyncio.run(_bench(options, kubeconfig, audit, report))
            except ApiError as err:
                raise BenchError(f"the API server call failed during the benchmark: {err}; "
                                 "retry on a quieter machine") from None
            except WaitTimeout as err:
                raise BenchError(f"{err}; the machine may be too busy for this size (load "
                                 f"average {os.getloadavg()[0]:.1f}): retry on a quieter "
                                 "machine, or with fewer --nodes") from None
    finally:
        signal.signal(signal.SIGTERM, previous)
