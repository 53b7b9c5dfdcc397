"""The discrete-event loop for one policy: virtual time, a heap of events, and the
scheduler's own ``GangScheduler`` (queue order, backfill, anti-starvation reservations,
reserve/permit, all-or-nothing gangs) with the policy plugged in as its placer.
Over 500 lines on purpose: one ``Simulation`` class whose event handlers share its state
(clock, heap, running jobs, queues); split, they would pass that state around.

At every event time: apply all events of that instant (finishes first, then failures,
repairs, arrivals, restarts), run one scheduling cycle, start what it placed, and sample
the metrics. Jobs run for their remaining work; a node failure kills every job with a pod
on it (they keep the work up to their last checkpoint and are queued again after
``restart_seconds``). A failed node is held by a placeholder pod that takes all of its
GPUs until it is repaired: for placement that is a cordon, without renumbering the
snapshot's nodes (a cordon rebuilds the whole index: O(nodes) per failure).

Queues (``_queues``, ``_admission``): with quotas, the cycle's ``Admission`` hook is the
scheduler's ledger; with preemption possible, every gang the cycle could not place (for
capacity, not quota) asks the scheduler's victim selection, the victims are evicted at
that instant (each loses the work since its last checkpoint and is queued again after
``restart_seconds``, as after a failure, but counted as a preemption, not a restart) and
the cycle runs again at the same instant for the preemptor. With one unlimited queue
(the default) none of this runs: no hook, no extra work per event.

Elastic jobs (``min_pods``, with an ``ElasticModel``): the gang is the scheduler's
elastic gang, admitted at the largest size that fits; the pods it lacks wait as a grow
gang (behind every waiting gang) and join when placed. A node failure or a preemption
that leaves at least ``min_pods`` running shrinks the job instead of stopping it. Each
size change costs ``rescale_seconds`` without progress; speed follows ``_elastic``.
"""

from __future__ import annotations

import dataclasses
import heapq
import math
import time
from collections import Counter, defaultdict
from collections.abc import Callable, Iterator, Sequence
from dataclasses import dataclass

from trainmaster.scheduler import (
    CLUSTER_LEVEL,
    GPU,
    NODE_LEVEL,
    ClusterState,
    Code,
    Cycle,
    Gang,
    GangScheduler,
    Placement,
    Placer,
    PodRequest,
    QueueLedger,
    RetryPolicy,
    SchedulerConfig,
    Status,
    TopologyConstraint,
    TopologyMode,
    Victim,
)

from ._admission import LedgerAdmission, Preemptor, RunningGang
from ._cluster import SimCluster
from ._elastic import ElasticModel
from ._fairness import FairnessMeter
from ._faults import FailureClock, FaultModel
from ._jobs import Job, WorkloadError
from ._metrics import JobRow, PolicyResult, QueueFigures, Series
from ._policies import Guard
from ._queues import QueueConfig, resolve

FINISH, FAIL, REPAIR, ARRIVE, RESTART = range(5)
"""Event kinds, in the order they apply within one instant."""

Progress = Callable[[str], None]


@dataclass(slots=True)
class _Run:
    """One job's live state."""

    job: Job
    remaining: float
    attempt: int = 0
    first_start: float = -1.0
    started: float = -1.0
    nodes: tuple[str, ...] = ()
    pods: tuple[PodRequest, ...] = ()
    finished: float = -1.0
    split: bool = False
    key: str = ""
    """Its gang's key (with preemption only)."""
    bindings: tuple[tuple[PodRequest, str], ...] = ()
    held: float = 0.0
    """Seconds it held its GPUs, over all attempts."""
    preempted: int = 0
    version: int = 0
    """Bumped at every start and size change: a FINISH event of an older one is stale."""
    resumed: float = 0.0
    """When its progress (re)started at its current size (after a rescale's pause)."""
    begun_with: float = 0.0
    """Its remaining work when this attempt started."""
    spawned: int = 0
    """Pods made for it so far in this attempt (unique names for the ones regrown)."""
    gpu_seconds: float = 0.0
    """GPU-seconds it held at the sizes it ran (kept for elastic jobs: their ETTR)."""
    counted: float = 0.0
    lost_preempted: float = 0.0
    """GPU-seconds of work it lost to preemptions (since its last checkpoint each time)."""
    lost_failed: float = 0.0
    """GPU-seconds of work it lost to node failures."""
    failures: int = 0
    """Times a node failure stopped it."""
    placed_nodes: int = 0
    """Distinct nodes of its latest placement."""

    @property
    def gpus(self) -> int:
        """GPUs it holds now."""
        return len(self.pods) * self.job.gpus_per_pod


def _topology(job: Job, config: SchedulerConfig, snapshot: ClusterState,
              elastic: bool = False) -> TopologyConstraint:
    gang = job.gang(config.policy, elastic)
    topology = TopologyConstraint(gang.domain, TopologyMode(gang.mode))
    try:
        snapshot.rank(topology.level)
    except ValueError:
        raise WorkloadError(
            f"{job.where()}: topology level {topology.level!r} is not one of "
            f"{', '.join(snapshot.level_names)}") from None
    return topology


class _Room:
    """The most GPUs a gang could ever get per topology constraint (computed once)."""

    def __init__(self, snapshot: ClusterState) -> None:
        cols = snapshot.columns
        self.node = max((a.get(GPU, 0) for a in cols.allocatable), default=0)
        self.cluster = sum(a.get(GPU, 0) for a in cols.allocatable)
        self.per_rank = {
            rank: max((d.capacity.get(GPU, 0) for d in snapshot.live_domains(rank)), default=0)
            for rank in range(1, len(snapshot.levels) + 2)
        }
        self.snapshot = snapshot

    def check(self, job: Job, topology: TopologyConstraint) -> None:
        """Refuse a job that could never run (it would wait forever)."""
        if job.gpus_per_pod > self.node:
            raise WorkloadError(f"{job.where()}: {job.gpus_per_pod} GPUs per pod, but the "
                                f"largest node has {self.node}")
        rank = self.snapshot.rank(topology.level)
        if topology.mode is TopologyMode.REQUIRED:
            room = self.node if rank == 0 else self.per_rank[rank]
            where = f"any {topology.level}"
        else:
            room, where = self.cluster, "the cluster"
        if job.gpus > room:
            raise WorkloadError(f"{job.where()}: needs {job.gpus} GPUs, {where} has at most "
                                f"{room}")


class Simulation:
    """One policy over one workload; ``run()`` returns its ``PolicyResult``."""

    def __init__(
        self,
        cluster: SimCluster,
        jobs: Sequence[Job],
        policy: str,
        placer: Placer,
        faults: FaultModel = FaultModel(),
        *,
        queues: QueueConfig = QueueConfig(),
        check: bool = False,
        progress: Progress | None = None,
        elastic: ElasticModel | None = None,
        domain_search: bool = True,
        retry: RetryPolicy = RetryPolicy(),
    ) -> None:
        self.cluster = cluster
        self.elastic = elastic
        """None: every job runs rigid at ``pods`` (``--elastic off``)."""
        self.rescales = 0
        self.policy = policy
        self.faults = faults
        self.queues = queues
        self.check = check
        self.progress = progress
        self.now = 0.0
        self.snapshot = ClusterState(cluster.nodes, levels=cluster.levels)
        config = SchedulerConfig(levels=cluster.levels)
        self.guard = Guard(placer)
        self.queue_of, self.priority_of = resolve(jobs, queues)
        self.ledger = (QueueLedger(queues.queues, queues.default, queues.cohorts, queues.fair,
                                   clock=lambda: self.now)
                       if queues.configured else None)
        self.fairness = FairnessMeter(queues)
        admission = (LedgerAdmission(self.ledger, self._queue_of_gang)
                     if self.ledger is not None and queues.enforced else None)
        self.admitting = admission is not None
        self.sched = GangScheduler(self.snapshot, clock=lambda: self.now,
                                   starvation_after=config.gang_timeout_seconds,
                                   placer=self.guard, admission=admission, retry=retry)
        # Preemption can happen only with the switch on and someone to evict: gangs of
        # lower priority, or borrowers in a cohort.
        self.preemptor: Preemptor | None = None
        if (self.ledger is not None and queues.preemption
                and (len(set(self.priority_of)) > 1 or queues.fair.enable
                     or any(q.cohort is not None for q in queues.queues))):
            self.preemptor = Preemptor(queues, self.ledger, placer)
            if elastic is not None:
                self.preemptor.rescale_seconds = elastic.rescale_seconds
            self.preemptor.domain_search = domain_search
        self.cycle = Cycle(self.sched, self, self if self.preemptor is not None else None,
                           instant_evictions=True, on_pass=self.guard.new_cycle)
        self.pending: dict[str, Gang] = {}
        self.index_of: dict[str, int] = {}
        """gang key -> job index (with preemption only, for the victims)."""
        self.running: set[int] = set()
        self.running_priorities: Counter[int] = Counter()
        self.preemptions = 0
        self.runs = [_Run(job, job.duration_s) for job in jobs]
        self.topologies: list[TopologyConstraint] = []
        self.size_rules = tuple((rule.max_nodes, TopologyConstraint(rule.domain,
                                                                    TopologyMode(rule.mode)))
                                for rule in config.policy)
        self.growing: dict[str, int] = {}
        """Grow gangs (an elastic job's missing pods) -> job index."""
        room = _Room(self.snapshot)
        for job in jobs:
            sized = self._elastic_job(job)
            topology = _topology(job, config, self.snapshot, sized)
            room.check(dataclasses.replace(job, pods=job.min_pods or job.pods) if sized
                       else job, topology)
            self.topologies.append(topology)
        self.leaf_of = {n.name: n.topology for n in cluster.nodes}
        self.leaf_gpus = max(cluster.largest_leaf_gpus, 1)
        self.gpus = cluster.gpus
        self.node_jobs: dict[str, set[int]] = {n.name: set() for n in cluster.nodes}
        self.down: dict[str, PodRequest] = {}
        self.queued: dict[str, int] = {}
        self.heap: list[tuple[float, int, int, int, int]] = []
        self._seq = 0
        self._live_events = 0  # events other than failures: the run ends without them
        self.allocated = 0
        self.held_by_queue: Counter[str] = Counter()
        """GPUs each queue's jobs hold now (with queues only)."""
        self.waiting_gpu_s: defaultdict[str, float] = defaultdict(float)
        """Per queue, GPU-seconds held while some gang waited (with queues only)."""
        self.failures = 0
        self.restarts = 0
        self.lost_gpu_seconds = 0.0
        self.finishes = 0
        """Jobs whose last attempt ran to the end (a test checks it equals the job count)."""

    def _queue_of_gang(self, key: str) -> str:
        index = self.queued.get(key)
        return self.queue_of[self.growing[key] if index is None else index]

    def _elastic_job(self, job: Job) -> bool:
        return self.elastic is not None and job.elastic

    # --- events ---------------------------------------------------------------------

    def _push(self, when: float, kind: int, index: int, attempt: int = 0) -> None:
        self._seq += 1
        heapq.heappush(self.heap, (when, kind, self._seq, index, attempt))
        if kind != FAIL:
            self._live_events += 1

    def _gang(self, index: int) -> Gang:
        run = self.runs[index]
        job = run.job
        name = f"j{index}"
        group = name if job.pods > 1 else None
        priority = self.priority_of[index]
        members = tuple(
            PodRequest(f"{name}-{run.attempt}-{k}", requests={GPU: job.gpus_per_pod},
                       priority=priority, creation_timestamp=job.submit_s, gang=group)
            for k in range(job.pods)
        )
        run.spawned = job.pods
        if self._elastic_job(job):
            return Gang(name, members, topology=self.topologies[index], priority=priority,
                        creation_timestamp=job.submit_s, min_member=job.min_pods or 0,
                        elastic=True, size_rules=() if job.topology else self.size_rules)
        return Gang(name, members, topology=self.topologies[index], priority=priority,
                    creation_timestamp=job.submit_s)

    def _submit(self, index: int) -> None:
        gang = self._gang(index)
        self.queued[gang.key] = index
        self.sched.submit(gang)
        if self.preemptor is not None:
            self.pending[gang.key] = gang
            self.index_of[gang.key] = index
            self.runs[index].key = gang.key

    def _start(self, index: int, bindings: Sequence[tuple[PodRequest, str]]) -> None:
        run = self.runs[index]
        run.counted = self.now
        for pod, node in bindings:
            self.snapshot.confirm(pod.uid)
            self.node_jobs[node].add(index)
        run.pods = tuple(p for p, _ in bindings)
        run.nodes = tuple(sorted({n for _, n in bindings}))
        run.started = run.resumed = self.now
        run.begun_with = run.remaining
        run.version += 1
        if self.preemptor is not None or self._elastic_job(run.job):
            run.bindings = tuple(bindings)
        if self.preemptor is not None:
            self.running.add(index)
            self.running_priorities[self.priority_of[index]] += 1
        if run.first_start < 0:
            run.first_start = self.now
        leaves = {self.leaf_of[n] for n in run.nodes}
        if len(leaves) > math.ceil(run.gpus / self.leaf_gpus):
            run.split = True
        self.allocated += run.gpus
        self._hold(index, run.gpus)
        run.placed_nodes = len(run.nodes)
        self._push(self.now + run.remaining / self._speed(run), FINISH, index, run.version)
        if len(run.pods) < run.job.pods:
            self._ask_to_grow(index)

    def _stop(self, index: int) -> None:
        run = self.runs[index]
        self._account(run)
        for pod in run.pods:
            self.snapshot.remove(pod.uid)
        if self.ledger is not None:
            for pod in run.pods:
                self.ledger.release(pod.uid)
        if self.preemptor is not None:
            self.running.discard(index)
            self.running_priorities[self.priority_of[index]] -= 1
        run.bindings = ()
        for node in run.nodes:
            self.node_jobs[node].discard(index)
        self.allocated -= run.gpus
        self._hold(index, -run.gpus)
        run.held += self.now - run.started
        run.pods, run.nodes = (), ()
        if self.growing.pop(f"default/j{index}", None) is not None:
            self.sched.remove(f"default/j{index}")  # its missing pods are not wanted now

    def _finish(self, index: int, attempt: int) -> None:
        run = self.runs[index]
        if attempt != run.version or not run.pods:
            return  # killed or resized since: a later event finishes it
        self._stop(index)
        run.remaining = 0.0
        run.finished = self.now
        self.finishes += 1

    def _fail(self, node_index: int) -> None:
        node = self.cluster.nodes[node_index]
        if node.name not in self.down:
            self.failures += 1
            for index in sorted(self.node_jobs[node.name]):
                self._lose(index, node.name)
            free = self.snapshot.free(node.name).get(GPU, 0)
            holder = PodRequest(f"down-{node.name}-{self.failures}", namespace="sim-faults",
                                requests={GPU: free} if free > 0 else {})
            self.snapshot.assume(holder, node.name)
            self.down[node.name] = holder
            self._push(self.now + self.faults.repair_minutes * 60, REPAIR, node_index)
        upcoming = self._failures.next()
        if upcoming is not None:
            self._push(upcoming[0], FAIL, upcoming[1])

    def _kill(self, index: int, *, preempted: bool = False) -> None:
        """Stop a job by a failure or a preemption: it keeps the work up to its last
        checkpoint and is queued again ``restart_seconds`` later. A preemption is not a
        failure: it counts as a preemption, not a restart (as the operator records it)."""
        run = self.runs[index]
        ran = self.now - run.started
        if self._elastic_job(run.job):
            # its progress at the sizes it ran, less the work since the last checkpoint
            self._progress(run)
            done = run.begun_with - run.remaining
            lost = min(done, (ran - self.faults.saved_work(ran, run.job.checkpoint_s))
                       * self._speed(run))
            lost_gpu_s = lost * run.job.gpus
            run.remaining += lost
        else:
            saved = min(self.faults.saved_work(ran, run.job.checkpoint_s), run.remaining)
            lost_gpu_s = (ran - saved) * run.job.gpus
            run.remaining -= saved
        self.lost_gpu_seconds += lost_gpu_s
        if preempted:
            run.lost_preempted += lost_gpu_s
        else:
            run.lost_failed += lost_gpu_s
            run.failures += 1
        self._stop(index)
        run.attempt += 1
        if preempted:
            run.preempted += 1
            self.preemptions += 1
        else:
            self.restarts += 1
        self._push(self.now + self.faults.restart_seconds, RESTART, index)

    def _hold(self, index: int, gpus: int) -> None:
        """Job ``index``'s queue holds ``gpus`` more GPUs (fewer if negative)."""
        if self.queues.configured:
            self.held_by_queue[self.queue_of[index]] += gpus

    def _repair(self, node_index: int) -> None:
        node = self.cluster.nodes[node_index]
        holder = self.down.pop(node.name, None)
        if holder is not None:
            self.snapshot.remove(holder.uid)

    # --- the loop -------------------------------------------------------------------

    def run(self) -> PolicyResult:
        started_wall = time.perf_counter()
        for index, run in enumerate(self.runs):
            self._push(run.job.submit_s, ARRIVE, index)
        self._failures = FailureClock(self.faults, len(self.cluster.nodes))
        first = self._failures.next()
        if first is not None:
            self._push(first[0], FAIL, first[1])
        series = Series()
        total = len(self.runs)
        done = 0
        last_report = started_wall
        wait_s = alloc_wait = alloc_all = frag_int = frag_s = 0.0
        frag_now = math.nan
        begin = self.runs[0].job.submit_s if self.runs else 0.0
        self.now = begin
        while done < total:
            if not self.heap or self._live_events == 0:
                stuck = sorted(self.queued)[:5]
                raise WorkloadError(f"{self.policy}: {total - done} jobs can never start "
                                    f"(e.g. {', '.join(stuck)})")
            when = self.heap[0][0]
            dt = when - self.now
            if dt > 0:
                if self.fairness.active and self.ledger is not None:
                    self.fairness.advance(dt, self.ledger.used,
                                          {self.queue_of[i] for i in self.queued.values()})
                alloc_all += self.allocated * dt
                if self.queued:
                    wait_s += dt
                    alloc_wait += self.allocated * dt
                    if self.queues.configured:
                        for queue, gpus in self.held_by_queue.items():
                            self.waiting_gpu_s[queue] += gpus * dt
                    if not math.isnan(frag_now):
                        frag_int += frag_now * dt
                        frag_s += dt
            self.now = when
            while self.heap and self.heap[0][0] == when:
                _, kind, _, index, attempt = heapq.heappop(self.heap)
                if kind != FAIL:
                    self._live_events -= 1
                if kind == FINISH:
                    before = self.runs[index].finished
                    self._finish(index, attempt)
                    if before < 0 <= self.runs[index].finished:
                        done += 1
                elif kind == FAIL:
                    self._fail(index)
                elif kind == REPAIR:
                    self._repair(index)
                else:  # ARRIVE, RESTART
                    self._submit(index)
            if self.queued or self.growing:
                self._cycle()
            if self.check:
                self._check_invariants()
            frag_now = self._fragmentation() if self.queued else math.nan
            series.time.append(self.now)
            series.allocation.append(self.allocated / self.gpus)
            series.fragmentation.append(frag_now)
            if self.progress is not None and time.perf_counter() - last_report >= 5:
                last_report = time.perf_counter()
                self.progress(f"{self.policy}: {done}/{total} jobs done, "
                              f"{len(self.queued)} queued, t={self.now / 3600:.1f} h virtual, "
                              f"{last_report - started_wall:.0f} s")
        return self._result(series, wait_s, alloc_wait, alloc_all, frag_int, frag_s,
                            self.now - begin, time.perf_counter() - started_wall)

    def _cycle(self) -> None:
        # The runtime's own cycle host (trainmaster/scheduler/runtime/cycle.py) with this
        # simulation's ports: instant starts (bind), instant evictions, virtual time.
        self.cycle.run()

    def bind(self, placement: Placement) -> None:
        """The bind port: the gang starts at once (a grow: its pods join at once)."""
        grown = self.growing.pop(placement.gang, None)
        if grown is not None:
            self.sched.remove(placement.gang)
            self._grow(grown, [(b.pod, b.node) for b in placement.bindings])
            return
        index = self.queued.pop(placement.gang)
        self.sched.remove(placement.gang)
        self.guard.forget(placement.gang)
        self.pending.pop(placement.gang, None)
        self._start(index, [(b.pod, b.node) for b in placement.bindings])

    def post_filter(self, gang: Gang) -> Status:
        """The post-filter port: preemption with the scheduler's rules (``_admission``)."""
        if self._preempt(gang.key):
            return Status(Code.SUCCESS, (), "Preemption")
        return Status(Code.UNSCHEDULABLE, (), "Preemption")

    def evict(self, victims: Sequence[Victim], preemptor: Gang) -> None:
        """The evict port: each victim stops at once, keeping its last checkpoint; an
        elastic gang that loses only its members above its minimum shrinks instead."""
        stopped = {v.gang for v in victims if not v.shrink}
        for victim in victims:
            index = self.index_of[victim.gang]
            if victim.gang in stopped:
                if self.runs[index].pods:
                    self._kill(index, preempted=True)
                continue
            self.preemptions += 1
            self.runs[index].preempted += 1
            self._shrink(index, {pod.uid for pod, _ in victim.pods})

    def _running(self) -> Iterator[RunningGang]:
        for index in sorted(self.running):
            run = self.runs[index]
            checkpoint = run.started + self.faults.saved_work(self.now - run.started,
                                                              run.job.checkpoint_s)
            yield RunningGang(run.key, self.priority_of[index], self.queue_of[index],
                              run.bindings, run.started, checkpoint,
                              (run.job.min_pods or 0) if self._elastic_job(run.job) else 0)

    def _preempt(self, key: str) -> bool:
        assert self.preemptor is not None
        gang = self.pending[key]
        lowest = min((p for p, n in self.running_priorities.items() if n > 0), default=None)
        free = sum(gpus * len(nodes) for gpus, nodes in self.snapshot.gpu_buckets.items())
        found = self.preemptor.choose(self.sched, gang, self.queue_of[self.queued[key]],
                                      self._running, lowest, self.now, free)
        if found is None:
            return False
        self.evict(found.victims, gang)
        return True

    # --- elastic jobs ---------------------------------------------------------------

    def _speed(self, run: _Run) -> float:
        if self.elastic is None:
            return 1.0
        return self.elastic.speed(len(run.pods), run.job.pods)

    def _progress(self, run: _Run) -> None:
        """Account the work done at the current size up to now."""
        if self.now > run.resumed:
            run.remaining = max(0.0, run.remaining - (self.now - run.resumed) * self._speed(run))
            run.resumed = self.now

    def _ask_to_grow(self, index: int) -> None:
        """(Re)submit the grow gang of a running elastic job: the pods it lacks."""
        run = self.runs[index]
        missing = run.job.pods - len(run.pods)
        key = f"default/j{index}"
        if missing <= 0:
            if self.growing.pop(key, None) is not None:
                self.sched.remove(key)
            return
        priority = self.priority_of[index]
        members = tuple(
            PodRequest(f"j{index}-{run.attempt}-{run.spawned + k}",
                       requests={GPU: run.job.gpus_per_pod}, priority=priority,
                       creation_timestamp=run.job.submit_s, gang=f"j{index}")
            for k in range(missing))
        run.spawned += missing
        job = run.job
        self.growing[key] = index
        self.sched.submit(Gang(f"j{index}", members, topology=self.topologies[index],
                               priority=priority, creation_timestamp=job.submit_s,
                               min_member=1, elastic=True, placed=len(run.pods),
                               size_rules=() if job.topology else self.size_rules))

    def _resized(self, index: int) -> None:
        """After a size change: the rescale pause, a new finish, the grow gang."""
        run = self.runs[index]
        assert self.elastic is not None
        self.rescales += 1
        run.resumed = self.now + self.elastic.rescale_seconds
        run.version += 1
        run.nodes = tuple(sorted({n for _, n in run.bindings}))
        run.placed_nodes = len(run.nodes)
        self._push(run.resumed + run.remaining / self._speed(run), FINISH, index, run.version)
        self._ask_to_grow(index)

    def _account(self, run: _Run) -> None:
        run.gpu_seconds += (self.now - run.counted) * run.gpus
        run.counted = self.now

    def _grow(self, index: int, bindings: Sequence[tuple[PodRequest, str]]) -> None:
        run = self.runs[index]
        self._account(run)
        self._progress(run)
        for pod, node in bindings:
            self.snapshot.confirm(pod.uid)
            self.node_jobs[node].add(index)
        run.pods += tuple(p for p, _ in bindings)
        run.bindings += tuple(bindings)
        run.nodes = tuple(sorted({*run.nodes, *(n for _, n in bindings)}))
        self.allocated += len(bindings) * run.job.gpus_per_pod
        self._hold(index, len(bindings) * run.job.gpus_per_pod)
        self._resized(index)

    def _shrink(self, index: int, gone: set[str]) -> None:
        """The pods ``gone`` (uids) leave; the job goes on without them."""
        run = self.runs[index]
        self._account(run)
        self._progress(run)
        for pod in run.pods:
            if pod.uid in gone:
                self.snapshot.remove(pod.uid)
                if self.ledger is not None:
                    self.ledger.release(pod.uid)
        self.allocated -= len(gone) * run.job.gpus_per_pod
        self._hold(index, -len(gone) * run.job.gpus_per_pod)
        run.pods = tuple(p for p in run.pods if p.uid not in gone)
        run.bindings = tuple(b for b in run.bindings if b[0].uid not in gone)
        nodes = {n for _, n in run.bindings}
        for node in run.nodes:
            if node not in nodes:
                self.node_jobs[node].discard(index)
        self._resized(index)

    def _lose(self, index: int, node: str) -> None:
        """A node failed under job ``index``: an elastic job left with at least its
        minimum shrinks; anything else stops."""
        run = self.runs[index]
        gone = {p.uid for p, on in run.bindings if on == node}
        if (self._elastic_job(run.job) and gone
                and len(run.pods) - len(gone) >= (run.job.min_pods or run.job.pods)):
            self._shrink(index, gone)
        else:
            self._kill(index)

    def _fragmentation(self) -> float:
        head = self.sched.queue.ordered()[0]
        per_pod = max(head.members[0].effective_requests.get(GPU, 0), 1)
        free = usable = 0
        for gpus, nodes in self.snapshot.gpu_buckets.items():
            free += gpus * len(nodes)
            usable += (gpus // per_pod) * per_pod * len(nodes)
        return (free - usable) / free if free else math.nan

    def _check_invariants(self) -> None:
        cols = self.snapshot.columns
        held = 0
        for i, free in enumerate(cols.free):
            gpus = free.get(GPU, 0)
            if gpus < 0:
                raise AssertionError(f"node {cols.nodes[i].name} over-allocated: {gpus} GPUs free")
            held += cols.allocatable[i].get(GPU, 0) - gpus
        placeholders = sum(p.effective_requests.get(GPU, 0) for p in self.down.values())
        if held - placeholders != self.allocated:
            raise AssertionError(f"{held - placeholders} GPUs held, {self.allocated} accounted")
        if self.admitting:
            self._check_quotas()

    def _check_quotas(self) -> None:
        """The ledger matches the running jobs, and no queue holds more than its quota
        allows: its nominal quota without a cohort, nominal + borrowing limit in one. (A
        cohort's total may exceed its nominal sum: a lender within its own quota is
        admitted while borrowers hold the idle GPUs, as in the scheduler.)"""
        assert self.ledger is not None
        running: Counter[str] = Counter()
        for index, run in enumerate(self.runs):
            if run.pods:
                running[self.queue_of[index]] += run.gpus
        for name in set(running) | set(self.ledger.queues):
            used = self.ledger.used(name)
            if used != running[name]:
                raise AssertionError(f"queue {name}: ledger {used}, running {running[name]}")
            spec = self.ledger.queues.get(name)
            if spec is None or spec.nominal_quota is None:
                continue
            cap = spec.nominal_quota if spec.cohort is None else (
                spec.nominal_quota + spec.borrowing_limit if spec.borrowing_limit is not None
                else None)
            if cap is not None and used > cap:
                raise AssertionError(f"queue {name}: {used} GPUs in use, at most {cap}")

    def _result(self, series: Series, wait_s: float, alloc_wait: float, alloc_all: float,
                frag_int: float, frag_s: float, span: float, wall: float) -> PolicyResult:
        runs = self.runs
        return PolicyResult(
            policy=self.policy,
            gpus=self.gpus,
            waits=[r.first_start - r.job.submit_s for r in runs],
            job_gpus=[r.job.gpus for r in runs],
            jcts=[r.finished - r.job.submit_s for r in runs],
            split_jobs=sum(r.split for r in runs),
            wait_seconds=wait_s,
            allocated_while_waiting=alloc_wait,
            allocated_total=alloc_all,
            span=span,
            fragmentation_integral=frag_int,
            fragmentation_seconds=frag_s,
            useful_gpu_seconds=sum(r.job.gpus * r.job.duration_s for r in runs),
            # an elastic job: the GPU-seconds it held at the sizes it ran
            held_gpu_seconds=sum(r.gpu_seconds if self._elastic_job(r.job)
                                 else r.job.gpus * (r.finished - r.first_start) for r in runs),
            jobs_finished=sum(r.finished >= 0 for r in runs),
            failures=self.failures,
            restarts=self.restarts,
            lost_gpu_seconds=self.lost_gpu_seconds,
            lost_preempted_gpu_seconds=sum(r.lost_preempted for r in runs),
            series=series,
            wall_seconds=wall,
            preemptions=self.preemptions,
            queues=self._queue_figures(span, wait_s) if self.queues.configured else None,
            job_rows=[JobRow(r.job.id, self.queue_of[i], r.job.submit_s, r.first_start,
                             r.finished, r.preempted, r.lost_preempted, r.failures,
                             r.lost_failed, r.job.pods, r.job.gpus, r.placed_nodes)
                      for i, r in enumerate(runs)],
            elastic_jobs=([r.job.elastic for r in runs] if any(r.job.elastic for r in runs)
                          else None),
            rescales=self.rescales,
            required_high_waits=(self._required_high_waits()
                                 if self.preemptor is not None else None),
            retries=self.sched.wake.stats.to_json(),
        )

    def _required_high_waits(self) -> list[float]:
        """Waits of the jobs of the highest priority whose topology is required at a
        switch level: the gangs domain-freeing preemption is for."""
        top = max(self.priority_of, default=0)
        return [r.first_start - r.job.submit_s
                for r, p in zip(self.runs, self.priority_of, strict=True)
                if p == top and r.job.topology is not None
                and r.job.topology.mode is TopologyMode.REQUIRED
                and r.job.topology.level not in (NODE_LEVEL, CLUSTER_LEVEL)]

    def _queue_figures(self, span: float, waiting: float) -> list[QueueFigures]:
        names = [q.name for q in self.queues.queues]
        names += sorted(set(self.queue_of) - set(names))
        out = []
        for name in names:
            runs = [r for r, q in zip(self.runs, self.queue_of, strict=True) if q == name]
            spec = self.queues.spec(name)
            out.append(QueueFigures(
                queue=name,
                nominal_quota=spec.nominal_quota if spec is not None else None,
                jobs=len(runs),
                gpu_seconds=sum(r.job.gpus * r.held for r in runs),
                span=span,
                waiting_gpu_seconds=self.waiting_gpu_s[name],
                waiting=waiting,
                cluster_gpus=self.gpus,
                waits=[r.first_start - r.job.submit_s for r in runs],
                preempted=sum(r.preempted for r in runs),
                lost_preempted_gpu_seconds=sum(r.lost_preempted for r in runs),
                fairness=self.fairness.figures(name),
            ))
        return out
