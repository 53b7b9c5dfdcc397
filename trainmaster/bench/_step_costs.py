"""Where a timed benchmark step's time went: the CPU each process of the benchmark
used, the API server's requests and watch events, and how fast the pods were deleted.

Why: with a deep queue the deep step's pods were deleted slower (about 60/s against
100/s with the queue empty), and the binds follow the deletions. Whether the scheduler's
CPU starves the control plane on the 2 cores, the scheduler writes more, or the API
server or kwok does more per pod with thousands pending in the namespace, shows in these
figures, read around the step (``CostMeter``).
"""

from __future__ import annotations

import os
import time
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path

from trainmaster.bench._apiserver_metrics import (
    increase,
    open_watches,
    request_counts,
    watch_events,
)
from trainmaster.bench._proc_cpu import CpuReading, cpu_used, read_cpu
from trainmaster.cluster import ClusterError, ClusterRecord, resolve_state_dir
from trainmaster.kubeclient import ApiError, Kube

BENCH_PROCESS = "benchmark"
"""This process (its watches of the pods, its create and delete calls)."""


def step_pids(kubeconfig: Path, own: Mapping[str, int]) -> dict[str, int]:
    """The processes whose CPU a step counts, by name: ``own`` (the benchmark's: its
    scheduler, itself) and those of the local cluster ``kubeconfig`` belongs to
    (kube-apiserver, etcd, kwok, kube-controller-manager...; none for a cluster not
    started by trainmaster). A cluster's process named like one of ``own`` or like
    another of its own gets a ``#2``, ``#3``... suffix."""
    try:
        record = ClusterRecord.load(resolve_state_dir(kubeconfig))
    except ClusterError:
        record = None
    pids = dict(own)
    for proc in record.processes if record is not None else ():
        name, n = proc.name, 2
        while name in pids:
            name, n = f"{proc.name}#{n}", n + 1
        pids[name] = proc.pid
    return pids


@dataclass(frozen=True, slots=True)
class StepCosts:
    load_average_1m: float
    """The machine's 1-minute load average when the step started."""
    window_seconds: float
    """From the step's start to its end (its last bind and the quiet after it)."""
    act_seconds: float
    """How long the step's own call took (for a timed step, the delete call)."""
    cpu_seconds: dict[str, float]
    """CPU seconds (user + system) each process used in the window."""
    cpu_seconds_in_act: dict[str, float]
    """The same, while the step's call ran."""
    pods_deleted: int
    """DELETED events of the namespace's pods on the benchmark's watch."""
    seconds_to_last_deletion: float
    pods_deleted_per_second: float
    """``pods_deleted`` / ``seconds_to_last_deletion`` (from the step's start)."""
    api_requests: dict[str, int]
    """API server requests in the window by ``"VERB resource[/subresource]"``, every
    client (its ``apiserver_request_total``)."""
    watch_events: dict[str, int]
    """Watch events the API server sent in the window, by resource (all watchers)."""
    pod_watches: int
    """Watches of pods open when the step started (every namespace)."""


def deletion_rate(times: Sequence[float], started: float) -> tuple[int, float, float]:
    """(pods deleted, seconds from ``started`` to the last, deletions per second)."""
    if not times:
        return 0, 0.0, 0.0
    seconds = max(times[-1] - started, 0.0)
    per_second = round(len(times) / seconds, 1) if seconds > 0 else 0.0
    return len(times), round(seconds, 3), per_second


class CostMeter:
    """Reads before a step (``start``), after its call (``act_done``) and at its end
    (``finish``). The API server's metrics are read outside the CPU window, so its own
    cost of answering them is not counted as the step's."""

    def __init__(self, api: Kube, pids: Mapping[str, int]) -> None:
        self._api = api
        self._pids = dict(pids)
        self._text_before = ""
        self._cpu_before: CpuReading = {}
        self._cpu_act: CpuReading = {}
        self._load = 0.0
        self._started = 0.0
        self._act_seconds = 0.0

    async def _metrics(self) -> str:
        """The API server's /metrics; "" when it refuses (a cluster not ours)."""
        try:
            return await self._api.get_text("/metrics")
        except ApiError:
            return ""

    async def start(self) -> float:
        """Take the first readings; the step's start (monotonic)."""
        self._text_before = await self._metrics()
        self._load = round(os.getloadavg()[0], 2)
        self._cpu_before = read_cpu(self._pids)
        self._started = time.monotonic()
        return self._started

    def act_done(self) -> None:
        self._cpu_act = read_cpu(self._pids)
        self._act_seconds = time.monotonic() - self._started

    async def finish(self, deleted_times: Sequence[float]) -> StepCosts:
        cpu_after = read_cpu(self._pids)
        window = time.monotonic() - self._started
        text = await self._metrics()
        deleted, to_last, rate = deletion_rate(deleted_times, self._started)
        before = self._text_before
        return StepCosts(
            load_average_1m=self._load, window_seconds=round(window, 3),
            act_seconds=round(self._act_seconds, 3),
            cpu_seconds=cpu_used(self._cpu_before, cpu_after),
            cpu_seconds_in_act=cpu_used(self._cpu_before, self._cpu_act),
            pods_deleted=deleted, seconds_to_last_deletion=to_last,
            pods_deleted_per_second=rate,
            api_requests=increase(request_counts(before), request_counts(text)),
            watch_events=increase(watch_events(before), watch_events(text)),
            pod_watches=open_watches(before, "pods"))
