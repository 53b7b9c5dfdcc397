"""The runtime: informers -> cache -> gang queue -> placement cycles -> concurrent binds.
Over 500 lines: the loop, its burst path and the per-gang records share one object's state.

One asyncio task runs cycles; informer handlers only update the cache and wake it. A
cycle (``GangScheduler.run_cycle``: priority, then age, backfill, anti-starvation) is
pure CPU over the snapshot and places whole gangs, leaving their pods ``Assumed``;
each placed gang is then bound by its own task while the next cycle already sees the
assumed pods as used. Binds never block the loop.

When does a cycle run? When a gang was added or changed (new pods, a PodGroup), when
capacity may have grown (a node added or changed, a pod deleted or finished, a failed
bind released its place), or when the earliest backoff of an unschedulable gang is due
(doubling per consecutive failure, ``backoff_initial`` to ``backoff_max``). Nothing else
(status heartbeats, our own condition patches) wakes it.

Restart safety: pods that already have ``spec.nodeName`` are listed as bound, never
pending, and the Binding API itself refuses a second bind (409), which the binder
turns into "taken". A gang found partly bound is finished, pinned to its domain (``gangs.py``).
"""

from __future__ import annotations

import asyncio
import logging
import time
from collections import deque
from collections.abc import Callable

from trainmaster.kubeclient import ApiError, Kube, Reflector, node_path, pod_path, podgroup_path
from trainmaster.tasks import cancel_all

from .._keys import PODGROUP_PLURAL
from ..framework.model import Gang
from ..framework.results import Placement
from ..framework.status import Code, Status
from ..state.fragmentation import fragmentation_report
from .binder import Binder, GangOutcome
from .bursts import fresh_burst, joint_plan
from .cache import UNFINISHED_PODS, ClusterCache
from .catch_up import catch_up
from .composites import composite_object_reflector, workload_reflector
from .config import SchedulerConfig
from .cycle import Cycle
from .events import ApiWriter, EventRecorder, default_identity
from .gang_scheduler import CycleResult, GangScheduler
from .gangs import LONE_PREFIX, Waiting, assemble, lone_gang
from .history import UsageHistory
from .jobsets import jobset_reflector
from .ledger import LedgerPublisher
from .local_queues import local_queue_reflector
from .metrics import SchedulerMetrics
from .preemptor import Preemptor, QuotaAdmission, nominations
from .queue import queue_key
from .records import GangRecords
from .report import Reporter, event_ref
from .upstream_groups import GroupStatus, upstream_reflector

log = logging.getLogger("trainmaster.scheduler")

# kube-scheduler's own pod informer filter: finished pods hold nothing.
_SETTLE = 0.01
_STREAM_QUIET = 0.05
_STREAM_STEPS = 20
"""While releases keep coming (a deleted collection's pods, one every few ms), a step
waits until none came for ``_STREAM_QUIET`` s, at most ``_STREAM_STEPS`` times: one
cycle then places into what the stream released, and its binds go out together after
it, instead of one small gang per release between the deletions (measured live with a
deep queue: docs/benchmarks.md, "Deep queue")."""
_EVENT_OBSERVATIONS = 1000
"""At most this many observations of one step's CPU per event (a node storm's thousands
of changes would cost more to observe than to answer)."""
_CHUNK = 8
"""Planned gangs placed per cycle before their binds are let out."""


_FRAGMENTATION_EVERY = 5.0
"""Seconds between two refreshes of the fragmentation gauges."""


class SchedulerRuntime:
    def __init__(
        self,
        api: Kube,
        config: SchedulerConfig,
        *,
        metrics: SchedulerMetrics | None = None,
        identity: str | None = None,
        clock: Callable[[], float] = time.monotonic,
    ) -> None:
        self.api = api
        self.config = config
        self.metrics = metrics or SchedulerMetrics()
        self.identity = identity or default_identity()
        self._clock = clock
        self.cache = ClusterCache(config)
        self.binder = Binder(api, self.cache, self.metrics, concurrency=config.bind_concurrency,
                             attempts=config.bind_attempts)
        self.writer = ApiWriter(quiet=self.binder.quiet)
        self.metrics.report_writes.set_function(self.writer.backlog)
        self.recorder = EventRecorder(api, self.writer, config.scheduler_name, self.identity)
        self.reporter = Reporter(self.recorder, config.report_interval, clock,
                                 is_pending=self._is_pending, group_status=GroupStatus(
                                     api, self.writer, config.scheduler_name))
        self.admission = QuotaAdmission(self.cache)
        self.ledger = LedgerPublisher(api, self.writer, config.scheduler_name,
                                      config.leader_election.lease_namespace)
        self.history = UsageHistory(api, self.cache.ledger, config.scheduler_name,
                                    config.leader_election.lease_namespace,
                                    config.usage_history_interval)
        self.preemptor = Preemptor(api, self.cache, config, self.recorder, self.writer,
                                   self.metrics, self.admission)
        self.reflectors = [
            Reflector(api, node_path(), self.cache.on_node, name="nodes"),
            Reflector(api, pod_path(), self.cache.on_pod, name="pods",
                      params={"fieldSelector": UNFINISHED_PODS}, skip=self.cache.skip_pod_event),
            Reflector(api, podgroup_path(), self.cache.on_group, name=PODGROUP_PLURAL,
                      optional=True),
            upstream_reflector(api, self.cache.on_upstream_group),
            workload_reflector(api, self.cache.on_workload),
            composite_object_reflector(api, self.cache.on_composite_object),
            jobset_reflector(api, self.cache.on_jobset),
            *(local_queue_reflector(api, ns, self.cache.on_local_queue)
              for ns in config.local_queue_namespaces),
        ]  # fmt: skip
        self._scheduler: GangScheduler | None = None
        self._cycle_host: Cycle | None = None
        self._records = GangRecords()
        """Per gang: queued version, why it waits, backoff, bind-failure hold."""
        self._binds: set[asyncio.Task[None]] = set()
        self._watches: list[asyncio.Task[None]] = []
        self.cycles = 0
        self._releases_answered = 0
        self._step_cpu = 0.0
        self._fragmentation_at = float("-inf")
        self._fragmentation_stale = False
        """A change came while the gauges were fresh: refresh them when they may be."""
        self.outcomes: deque[GangOutcome] = deque(maxlen=100)
        """Gangs undone because too few members could be bound (for inspection)."""

    def _is_pending(self, uid: str) -> bool:
        """Still waiting for a place: known unbound, and not assumed by us."""
        return uid in self.cache.pending and (
            not self.cache.ready or self.cache.snapshot.pod_state(uid) is None
        )

    # --- lifecycle --------------------------------------------------------------------

    @property
    def cycle(self) -> Cycle:
        if self._cycle_host is None:
            raise RuntimeError("start() first")
        return self._cycle_host

    @property
    def scheduler(self) -> GangScheduler:
        if self._scheduler is None:
            raise RuntimeError("start() first")
        return self._scheduler

    async def start(self) -> None:
        """List nodes, pods and PodGroups, build the snapshot once, then watch."""
        log.debug("listing nodes, pods and PodGroups")
        # All three at once: pod events that arrive before the nodes are kept and
        # replayed when the snapshot is built from the full node list.
        # Connections for the first binds are opened meanwhile.
        await asyncio.gather(*(r.relist() for r in self.reflectors),
                             self.api.warm(self.config.bind_concurrency))
        self.cache.build_snapshot()
        self._refresh_fragmentation(self._clock())
        self._scheduler = GangScheduler(
            self.cache.snapshot,
            clock=self._clock,
            starvation_after=self.config.gang_timeout_seconds,
            admission=self.admission,
            retry=self.config.retry_policy(),
        )
        self._cycle_host = Cycle(self._scheduler, self, self)
        self._watches = [asyncio.create_task(r.run(), name=f"watch-{r.name}")
                         for r in self.reflectors]
        self.writer.start()
        log.info("cache synced: %d nodes, %d pending pods, %d PodGroups",
                 len(self.cache.nodes), len(self.cache.pending), len(self.cache.groups))

    async def catch_up(self) -> None:
        """A new leader applies the binds its pod watch has not delivered yet
        (``catch_up.py``). A failed list only costs what it would have saved (the Binding
        API refuses a second bind of a pod): logged, and scheduling goes on."""
        try:
            await catch_up(self.api, self.cache, self.config.scheduler_name)
        except ApiError as err:
            log.warning("could not list the bound pods (%s); scheduling on the watch's view",
                        err)

    async def restore_history(self) -> None:
        """A new leader takes the queues' usage history its predecessor saved
        (``history.py``), before its first cycle."""
        await self.history.load()

    async def run(self, stop: asyncio.Event | None = None) -> None:
        """Schedule until ``stop`` is set (or the task is cancelled). ``start`` first."""
        stop = stop or asyncio.Event()
        stopper = asyncio.create_task(stop.wait())
        saver = asyncio.create_task(self.history.run(), name="usage-history")
        try:
            while not stop.is_set():
                await self._wait(stopper)
                if stop.is_set():
                    break
                await self.step()
        finally:
            stopper.cancel()
            saver.cancel()

    async def _wait(self, stopper: asyncio.Task[bool]) -> None:
        changed = self.cache.changed
        if not changed.is_set():
            waiter = asyncio.create_task(changed.wait())
            due = self._next_retry()
            held = self.reporter.next_due()  # a report the interval held back
            if held is not None:
                due = held if due is None else min(due, held)
            if self._fragmentation_stale:  # a refresh was skipped: come back for it
                refresh = self._fragmentation_at + _FRAGMENTATION_EVERY
                due = refresh if due is None else min(due, refresh)
            timeout = None if due is None else max(0.0, due - self._clock())
            try:
                await asyncio.wait({waiter, stopper}, timeout=timeout,
                                   return_when=asyncio.FIRST_COMPLETED)
            finally:
                waiter.cancel()
            # Let a burst of events (a new Job's pods, a node storm) land in one step.
            await asyncio.sleep(_SETTLE)
        await self._release_stream()
        changed.clear()

    async def _release_stream(self) -> None:
        """After a release, wait while more releases keep arriving (``_STREAM_QUIET``).
        Also for a step that a retry's timer started while a stream is still coming (its
        last release less than ``_STREAM_QUIET`` ago): live with 2,000 gangs waiting, such
        steps were four in five of a refill's cycles, placed nothing (the capacity was the
        stream's, not yet seen) and wrote their gangs' reports between the deletions."""
        streaming = time.monotonic() - self.cache.last_release < _STREAM_QUIET
        if not (self.cache.capacity_changed or streaming):
            return
        seen = self.cache.releases
        for _ in range(_STREAM_STEPS):
            await asyncio.sleep(_STREAM_QUIET)
            if self.cache.releases == seen:
                return
            seen = self.cache.releases

    def stop_starting(self) -> None:
        """A clean stop begins: bind no gang not yet begun (``Binder.stop_starting``)."""
        self.binder.stop_starting()

    async def shutdown(self, drain: float = 10.0) -> None:
        """Stop watching; let the gangs whose binds began finish (so no gang is cut in
        half by a clean stop), send none of the others; flush reports."""
        self.stop_starting()
        watches, self._watches = self._watches, []
        await cancel_all(watches)
        if self._binds:
            _, late = await asyncio.wait(set(self._binds), timeout=drain)
            for task in late:
                task.cancel()
        await self.writer.drain(min(drain, 2.0))
        await self.writer.stop()

    async def abort(self, timeout: float = 5.0) -> None:
        """Stop now (leadership lost): another replica may already be binding. Bounded:
        a task that will not stop must not keep this replica from exiting."""
        tasks = [*self._watches, *self._binds]
        self._watches = []
        await cancel_all(tasks, timeout)
        await self.writer.stop(timeout)

    async def idle(self) -> None:
        """Wait until no bind is in flight (tests, benchmarks)."""
        while self._binds:
            await asyncio.wait(set(self._binds))

    # --- one step ---------------------------------------------------------------------

    async def step(self) -> CycleResult | None:
        """Apply cache changes; run a cycle if anything could have changed the answer."""
        self.cache.apply_node_updates()
        now = self._clock()
        for key, until in self._records.held():
            if until <= now:
                self._records.get(key).held_until = None
                self._records.settle(key)
                self.cache.touch(key)
        submitted = {key for key in self.cache.take_dirty() if self._sync(key)}
        capacity = self.cache.take_capacity_changed()
        due = self._next_retry()
        now = self._clock()
        result = None
        timer = due is not None and due <= now
        # Capacity events since the last step: pods gone, binds forgotten, nodes changed.
        released = self.cache.releases - self._releases_answered
        self._releases_answered = self.cache.releases
        if len(self.scheduler.queue) and (submitted or capacity or timer):
            self._step_cpu = 0.0
            result = await self._schedule(now, submitted)
            events = max(1, released + len(submitted) + int(timer))
            for _ in range(min(events, _EVENT_OBSERVATIONS)):
                self.metrics.event_cpu.observe(self._step_cpu / events)
        self._queue_metrics()
        waiting = list(self._records.waiting())
        self.metrics.pending_gangs.set(len(self.scheduler.queue) + len(waiting))
        self.metrics.pending_pods.set(
            sum(len(g.members) for g in self._records.queued().values())
            + sum(len(self.cache.members.get(k, ())) for k in waiting)
        )
        self.reporter.flush()
        self._fragmentation_stale = True
        self._refresh_fragmentation(now)
        return result

    def _queue_metrics(self) -> None:
        ledger = self.cache.ledger
        if not ledger.enabled:
            return
        self.ledger.update(ledger.usage())
        pending: dict[str, int] = {name: 0 for name in ledger.queues}
        for gang in self._records.queued().values():
            queue = self.admission.queue_of_gang(gang)
            pending[queue] = pending.get(queue, 0) + 1
        for usage in ledger.usage():
            self.metrics.queue_in_use.labels(usage.name).set(usage.in_use)
            self.metrics.queue_borrowed.labels(usage.name).set(usage.borrowed)
            if usage.nominal_quota is not None:
                self.metrics.queue_quota.labels(usage.name).set(usage.nominal_quota)
        for queue, count in pending.items():
            self.metrics.queue_pending.labels(queue).set(count)

    def _refresh_fragmentation(self, now: float) -> None:
        """The fragmentation gauges, at most every few seconds: one pass over every node,
        often enough for a dashboard, rare enough for 10k nodes."""
        if not self.cache.ready or now - self._fragmentation_at < _FRAGMENTATION_EVERY:
            return
        self._fragmentation_at = now
        self._fragmentation_stale = False
        self.metrics.observe_fragmentation(fragmentation_report(self.cache.snapshot))

    def _sync(self, key: str) -> bool:
        """Re-assemble one gang from the cache; True if the queue got a new version."""
        sched = self.scheduler
        members = self.cache.pending_members(key)
        record = self._records.get(key)
        if not members:
            if record.queued is not None:
                sched.remove(key)
                record.queued = None
            record.waiting = None
            record.failures, record.retry_at = 0, None
            self.admission.refused.pop(key, None)
            self.preemptor.evicting.pop(key, None)
            if not self.cache.members.get(key):  # none in flight either
                record.first_seen = None
            self._records.settle(key)
            self.reporter.forget(key)
            return False
        if record.first_seen is None:
            record.first_seen = self._clock()
        if record.held_until is not None:  # its last bind failed: not before the backoff
            if record.queued is not None:
                sched.remove(key)
                record.queued = None
            return False
        requests = [m.request for m in members]
        refused = self.cache.refusal(key, members)
        if refused is not None:
            if record.queued is not None:
                sched.remove(key)
                record.queued = None
            record.waiting = Waiting(key, refused[1])
            self.reporter.refused(key, requests, refused[1], self.cache.groups.get(key),
                                     reason=refused[0])
            return False
        unsupported = sorted({m.unsupported for m in members if m.unsupported})
        gang: Gang | Waiting
        if unsupported:
            gang = Waiting(key, f"cannot be scheduled by this scheduler: {'; '.join(unsupported)}")
        elif key.split("/", 1)[-1].startswith(LONE_PREFIX):
            gang = lone_gang(requests[0])
        else:
            gang = assemble(key, self.cache.groups.get(key), requests,
                            self.cache.placed_nodes(key), self.config)
        if isinstance(gang, Waiting):
            if record.queued is not None:
                sched.remove(key)
                record.queued = None
            record.waiting = gang
            self.metrics.attempts.labels("waiting").inc()
            self.reporter.unschedulable(key, requests, gang.reason, self.cache.groups.get(key))
            return False
        record.waiting = None
        record.queued = gang
        sched.submit(gang)
        if key not in sched.nominated and key not in sched.expired_nominations:
            # nominated by preemption, maybe by a previous leader
            nodes = nominations(self.cache, gang)
            if nodes:
                sched.nominated[key] = nodes
        return True

    def _next_retry(self) -> float | None:
        if self._scheduler is None or not self._scheduler.retry.index:
            return self._records.next_retry()
        # The core's timers decide who is retried when (retry.py); a record's own
        # retry_at would run cycles in which nobody is due.
        due = (self._records.next_hold(), self._scheduler.next_wake())
        return min((t for t in due if t is not None), default=None)

    def _backoff(self, failures: int) -> float:
        return float(min(self.config.backoff_initial * 2 ** (failures - 1),
                         self.config.backoff_max))

    async def _schedule(self, now: float, submitted: set[str]) -> CycleResult:
        """One cycle; or, for a fresh burst (``fresh_burst``), its gangs in chunks of
        queue order so the first binds go out while later gangs are still being placed,
        each pinned to its leaf when the burst was planned jointly (``joint_plan``); then
        everything else (gangs left out of the plan, gangs that did not fit in their
        chunk) in one more cycle."""
        burst = fresh_burst(self._records.queued(), submitted, self._records)
        if burst is None:
            return self._cycle(now)
        pinned = joint_plan(burst, self.cache.snapshot, self.config.levels,
                            self.scheduler.profile.filters)
        if pinned is None:
            # Not plannable (e.g. gangs found partly bound, as a new leader finds the last
            # binds of the old one): still bind in chunks of queue order, so the first
            # binds do not wait for a cycle over every gang (2 s for 600 at 5,000 nodes).
            if len(burst) <= _CHUNK:
                return self._cycle(now)
            pinned = burst
        for key in burst:
            self.scheduler.remove(key)
        withheld = [k for k in burst if k not in pinned]
        quiet = set(pinned)
        ordered = sorted(pinned.values(), key=queue_key)
        placed: list[Placement] = []
        for start in range(0, len(ordered), _CHUNK):
            for gang in ordered[start:start + _CHUNK]:
                self.scheduler.submit(gang)
            result = self._cycle(now, quiet=quiet)
            placed.extend(result.placed)
            for failure in result.unschedulable:
                if failure.gang in quiet:
                    self.scheduler.remove(failure.gang)
                    withheld.append(failure.gang)
            await asyncio.sleep(0)  # let this chunk's binds go out
        for key in withheld:
            record = self._records.peek(key)
            original = record.queued if record is not None else None
            if original is not None:
                self.scheduler.submit(original)
        last = self._cycle(now)
        return CycleResult((*placed, *last.placed), last.unschedulable, last.reservations)

    def _cycle(self, now: float, quiet: set[str] | frozenset[str] = frozenset()) -> CycleResult:
        """Run the core's cycle; bind what it placed; back off and report the rest
        (except ``quiet`` gangs, whose failure the caller handles)."""
        cpu = time.thread_time()  # the cycle runs on this thread without yielding
        outcome = self.cycle.run(quiet)
        used = time.thread_time() - cpu
        self.metrics.cycle_cpu.observe(used)
        self._step_cpu += used
        result = outcome.result()
        elapsed = outcome.core_seconds
        self.metrics.cycle.observe(elapsed)
        self.metrics.observe_retries(self.scheduler.wake.stats)
        self.cycles += 1
        log.debug("cycle %d: %d gangs placed, %d not, %.1f ms", self.cycles, len(result.placed),
                  len(result.unschedulable), elapsed * 1000)
        for failure in result.unschedulable:
            key = failure.gang
            if key in quiet:
                continue
            label = {Code.WAIT: "waiting", Code.ERROR: "error"}.get(failure.code, "unschedulable")
            self.metrics.attempts.labels(label).inc()
            record = self._records.get(key)
            record.failures += 1
            record.retry_at = now + self._backoff(record.failures)
            waiting = record.queued
            if waiting is None:
                continue
            reason = failure.reason
            preempting = outcome.post_filtered.get(key)
            if preempting is not None and preempting.is_success():
                reason = f"{preempting.message}; {reason}"
            self.reporter.unschedulable(key, waiting.members, reason,
                                        self.cache.groups.get(key))
        return result

    def bind(self, placement: Placement) -> None:
        """The bind port: bind a placed gang in its own task (the cycle goes on)."""
        record = self._records.get(placement.gang)
        gang = record.queued
        assert gang is not None, placement.gang  # the core placed only queued gangs
        record.queued, record.failures, record.retry_at = None, 0, None
        self.metrics.attempts.labels("scheduled").inc()
        controlled = {
            b.pod.uid: self.cache.pending[b.pod.uid].controlled
            for b in placement.bindings
            if b.pod.uid in self.cache.pending
        }
        task = asyncio.create_task(self._bind(gang, placement, controlled))
        self._binds.add(task)
        task.add_done_callback(self._binds.discard)

    def post_filter(self, gang: Gang) -> Status:
        """The post-filter port: preemption (``Preemptor``)."""
        return self.preemptor.post_filter(self.scheduler, gang)

    async def _bind(self, gang: Gang, placement: Placement, controlled: dict[str, bool]) -> None:
        group = self.cache.groups.get(gang.key)
        outcome = await self.binder.bind_gang(
            placement, gang.required_members, lambda uid: controlled.get(uid, False)
        )
        if outcome.abandoned:
            return  # a clean stop came first: the next leader places it (stop_starting)
        if outcome.stands:
            record = self._records.get(gang.key)
            record.bind_failures = 0
            seen, record.first_seen = record.first_seen, None
            self._records.settle(gang.key)
            if seen is not None:
                self.metrics.latency.observe(self._clock() - seen)
            self.reporter.scheduled(gang.key, placement, group)
            if self.cache.pending_members(gang.key):
                # An elastic gang placed at part size: the rest is now a grow. Its bound
                # members' echoes may never reach on_pod (the cache skips updates of pods
                # it already holds as bound), so nothing else would re-assemble it.
                self.cache.touch(gang.key)
            return
        self.outcomes.append(outcome)
        # Back off before placing it again: a bind refused for good (a webhook, RBAC)
        # must not turn into a loop of place, bind, fail.
        record = self._records.get(gang.key)
        record.bind_failures += 1
        record.held_until = self._clock() + self._backoff(record.bind_failures)
        self.cache.changed.set()
        ref = event_ref(group, gang.members)
        reasons = "; ".join(sorted(set(outcome.errors.values()))) or "members vanished"
        message = f"bound {outcome.bound} of {gang.required_members} required pods ({reasons})"
        if outcome.undone:
            message += (f"; deleted {len(outcome.undone)} bound pods for their controller to "
                        "recreate")
        if outcome.kept:
            message += f"; left {len(outcome.kept)} without a controller bound"
        self.recorder.event(ref, "Warning", "GangBindFailed", message)
