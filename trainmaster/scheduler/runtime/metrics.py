"""Prometheus metrics of the runtime, on their own registry, served on /metrics.

A private registry (not the process-global default) so that two runtimes in one
process, as in tests, never collide, and so /metrics shows exactly the scheduler.
Binds per second is ``rate(trainmaster_scheduler_bound_pods_total[1m])``.
"""

from __future__ import annotations

from prometheus_client import CollectorRegistry, Counter, Gauge, Histogram

from trainmaster.metrics_server import MetricsServer

from ..state.fragmentation import FragmentationReport
from .retry import REASONS, RetryStats

# Fine below 50 ms: `bench scheduler --pending` reads its p50/p95 from these.
_CPU_BUCKETS = (0.0005, 0.001, 0.002, 0.003, 0.005, 0.0075, 0.01, 0.015, 0.02, 0.025, 0.03,
                0.04, 0.05, 0.075, 0.1, 0.25, 0.5, 1, 2.5, 5, 10)
_LATENCY_BUCKETS = (0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10, 30, 60, 300, 1800)


class SchedulerMetrics:
    def __init__(self) -> None:
        self.registry = CollectorRegistry(auto_describe=True)
        ns = "trainmaster_scheduler"
        r = self.registry
        self.attempts = Counter(
            f"{ns}_schedule_attempts", "Gang placement attempts by result "
            "(scheduled, unschedulable, waiting, error).", ["result"], registry=r,
        )  # fmt: skip
        self.latency = Histogram(
            f"{ns}_scheduling_latency_seconds", "From a gang's first sight (pending) to its "
            "last member bound.", buckets=_LATENCY_BUCKETS, registry=r,
        )  # fmt: skip
        self.cycle = Histogram(
            f"{ns}_cycle_duration_seconds", "One scheduling cycle over the queue "
            "(placement only, no API calls).", buckets=_LATENCY_BUCKETS, registry=r,
        )  # fmt: skip
        self.cycle_cpu = Histogram(
            f"{ns}_cycle_cpu_seconds", "CPU time of one scheduling cycle with what it "
            "hands on (binds started, post-filter): the cost of the events it answers.",
            buckets=_CPU_BUCKETS, registry=r,
        )  # fmt: skip
        self.event_cpu = Histogram(
            f"{ns}_event_cpu_seconds", "A step's cycle CPU shared among the events it "
            "answered (pods released, nodes changed, gangs submitted, a retry timer due), "
            "observed once per event: what one event costs when a cycle answers several.",
            buckets=_CPU_BUCKETS, registry=r,
        )  # fmt: skip
        self.pending_gangs = Gauge(
            f"{ns}_pending_gangs", "Gangs waiting to be placed.", registry=r
        )
        self.pending_pods = Gauge(f"{ns}_pending_pods", "Pods waiting to be placed.", registry=r)
        self.bound_pods = Counter(
            f"{ns}_bound_pods", "Pods bound through the Binding API.", registry=r
        )
        self.binds = Counter(
            f"{ns}_bind_requests", "Binding API calls by result (bound, gone, taken, "
            "retry, failed).", ["result"], registry=r,
        )  # fmt: skip
        self.undone = Counter(
            f"{ns}_gang_undo_pods", "Bound pods deleted to undo a gang whose bind failed.",
            registry=r,
        )
        self.leader = Gauge(f"{ns}_leader", "1 while this replica holds the lease.", registry=r)
        self.queue_in_use = Gauge(
            f"{ns}_queue_gpus_in_use", "GPUs held by a queue's bound and assumed pods.",
            ["queue"], registry=r,
        )  # fmt: skip
        self.queue_quota = Gauge(
            f"{ns}_queue_nominal_quota_gpus", "A queue's nominal GPU quota (queues with one).",
            ["queue"], registry=r,
        )  # fmt: skip
        self.queue_borrowed = Gauge(
            f"{ns}_queue_borrowed_gpus", "GPUs a queue uses beyond its nominal quota.",
            ["queue"], registry=r,
        )  # fmt: skip
        self.queue_pending = Gauge(
            f"{ns}_queue_pending_gangs", "Gangs of a queue waiting to be placed.",
            ["queue"], registry=r,
        )  # fmt: skip
        self.preemptions = Counter(
            f"{ns}_preemptions", "Gangs evicted by preemption, by the preemptor's queue.",
            ["queue"], registry=r,
        )  # fmt: skip
        # What _fragmentation.fragmentation_report computes, refreshed every few seconds.
        self.fragmentation = Gauge(
            f"{ns}_gpu_fragmentation_ratio", "Share of free GPUs on nodes that also run pods.",
            registry=r,
        )
        self.leaf_fragmentation = Gauge(
            f"{ns}_gpu_leaf_fragmentation_ratio", "Share of free GPUs outside wholly free "
            "leaves (lowest topology level).", registry=r,
        )  # fmt: skip
        self.free_gpus = Gauge(f"{ns}_free_gpus", "Free GPUs on schedulable nodes.", registry=r)
        self.total_gpus = Gauge(
            f"{ns}_allocatable_gpus", "Allocatable GPUs on schedulable nodes.", registry=r
        )
        # The cycle's wake-up index (retry.py): who was tried again, and why.
        self.wakeups = Counter(
            f"{ns}_retry_wakeups", "Waiting gangs tried again, by what woke them (new, "
            "capacity, quota, reservation, starving, backoff, full_pass, node_change, "
            "preemption, every_cycle).", ["reason"], registry=r,
        )  # fmt: skip
        self.full_passes = Counter(
            f"{ns}_retry_full_passes", "Cycles that tried every queued gang (periodic, or "
            "after a node change).", registry=r,
        )  # fmt: skip
        self.backoffs = Counter(
            f"{ns}_retry_backoffs", "Failed tries that put a gang into (longer) backoff.",
            registry=r,
        )
        self.skipped = Counter(
            f"{ns}_retry_skipped_gangs", "Queued gangs a cycle did not try (nothing that "
            "happened could help them).", registry=r,
        )  # fmt: skip
        self.report_writes = Gauge(
            f"{ns}_report_writes_queued", "Report writes (pod conditions, Events) queued or "
            "running; they yield to binds.", registry=r,
        )  # fmt: skip
        for reason in REASONS:
            self.wakeups.labels(reason)
        self._retries = RetryStats()
        self._http = MetricsServer(r)

    def observe_retries(self, stats: RetryStats) -> None:
        """Add what ``stats`` counted since the last call."""
        seen = self._retries
        for reason, count in stats.wakeups.items():
            if count > seen.wakeups.get(reason, 0):
                self.wakeups.labels(reason).inc(count - seen.wakeups.get(reason, 0))
                seen.wakeups[reason] = count
        if stats.full_passes > seen.full_passes:
            self.full_passes.inc(stats.full_passes - seen.full_passes)
        if stats.backoffs > seen.backoffs:
            self.backoffs.inc(stats.backoffs - seen.backoffs)
        if stats.skipped > seen.skipped:
            self.skipped.inc(stats.skipped - seen.skipped)
        seen.full_passes, seen.backoffs, seen.skipped = (stats.full_passes, stats.backoffs,
                                                         stats.skipped)

    def observe_fragmentation(self, report: FragmentationReport) -> None:
        self.fragmentation.set(report.fragmentation_ratio)
        self.leaf_fragmentation.set(report.leaf_fragmentation_ratio)
        self.free_gpus.set(report.free)
        self.total_gpus.set(report.total)

    def serve(self, address: str, port: int) -> int:
        """Start the /metrics HTTP server in a thread; returns the bound port."""
        return self._http.serve(address, port)

    def stop(self) -> None:
        self._http.stop()
