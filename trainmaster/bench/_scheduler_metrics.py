"""The scheduler's own /metrics as `bench scheduler --pending` reads them: its CPU
histograms (per cycle, per event), quantiles between two readings (as Prometheus'
``histogram_quantile``), the pending gangs and the report writes still queued."""

from __future__ import annotations

import asyncio
import math
import re
import time
import urllib.request

from trainmaster.bench._errors import BenchError

Histogram = dict[float, float]
_BUCKET = re.compile(r'^trainmaster_scheduler_cycle_cpu_seconds_bucket\{le="([^"]+)"\} (\S+)$')
_EVENT_BUCKET = re.compile(
    r'^trainmaster_scheduler_event_cpu_seconds_bucket\{le="([^"]+)"\} (\S+)$')
_PENDING = re.compile(r"^trainmaster_scheduler_pending_gangs (\S+)$")
_REPORTS = re.compile(r"^trainmaster_scheduler_report_writes_queued (\S+)$")


def _histogram(text: str, bucket: re.Pattern[str]) -> Histogram:
    """One histogram's cumulative bucket counts by upper bound, from /metrics."""
    buckets: Histogram = {}
    for line in text.splitlines():
        found = bucket.match(line)
        if found:
            buckets[float(found.group(1))] = float(found.group(2))
    return buckets


def event_histogram(text: str) -> Histogram:
    """The scheduler's CPU per event (``trainmaster_scheduler_event_cpu_seconds``: a
    step's cycle CPU shared among the events it answered), as cumulative bucket counts."""
    return _histogram(text, _EVENT_BUCKET)


def parse_metrics(text: str) -> tuple[Histogram, int]:
    """(cumulative bucket counts by upper bound, pending gangs) from /metrics."""
    pending = 0
    for line in text.splitlines():
        if (gauge := _PENDING.match(line)) is not None:
            pending = int(float(gauge.group(1)))
    return _histogram(text, _BUCKET), pending


def report_backlog(text: str) -> int:
    """The scheduler's queued and running report writes, from /metrics (0 if absent)."""
    for line in text.splitlines():
        found = _REPORTS.match(line)
        if found:
            return int(float(found.group(1)))
    return 0


def quantile(q: float, before: Histogram, after: Histogram) -> float:
    """The ``q`` quantile of the observations between two readings, linear within a
    bucket (``histogram_quantile``); 0 if none."""
    bounds = sorted(after)
    counts = [after[b] - before.get(b, 0.0) for b in bounds]
    if not counts or counts[-1] <= 0:
        return 0.0
    rank = q * counts[-1]
    lower, seen = 0.0, 0.0
    for bound, count in zip(bounds, counts, strict=True):
        if count >= rank:
            if math.isinf(bound):
                return lower
            inside = count - seen
            return lower + (bound - lower) * ((rank - seen) / inside if inside else 1.0)
        lower, seen = bound, count
    return lower


async def scrape(port: int, timeout: float = 60.0) -> tuple[Histogram, int]:
    return parse_metrics(await metrics_text(port, timeout))


async def metrics_text(port: int, timeout: float = 60.0) -> str:
    url = f"http://127.0.0.1:{port}/metrics"

    def get() -> str:
        with urllib.request.urlopen(url, timeout=5) as answer:
            return bytes(answer.read()).decode()

    deadline = time.monotonic() + timeout
    while True:
        try:
            return await asyncio.to_thread(get)
        except OSError:
            if time.monotonic() > deadline:
                raise BenchError(f"the scheduler's metrics on port {port} did not answer "
                                 f"in {timeout:.0f}s; see its log") from None
            await asyncio.sleep(0.5)
