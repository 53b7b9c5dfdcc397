"""What one policy's run produced, and the figures the issue defines (docs/simulate.md).

* ``gpu_allocation_waiting``: allocated GPUs / all GPUs, time-weighted over the time when
  some gang is queued (work is waiting); None if nothing ever waited.
* ``gpu_allocation_run``: the same over the whole run (first submit to last finish).
* ``gpu_allocation``: the first if work ever waited, else the second (the original key).
  A queue's ``gpu_allocation_waiting`` and ``gpu_allocation_run`` are its jobs' GPUs over
  all GPUs on the same two time bases, so the queues' figures sum to the policy's.
* ``wait``: first start minus submit time, per job; ``wait_p95_large_s`` over jobs of 64+
  GPUs (null if there are none).
* ``jct_mean_s``: finish minus submit time, mean over jobs.
* ``gangs_split_beyond_needed``: jobs placed (in any attempt) over more leaves than
  ceil(GPUs / GPUs of the largest leaf), as in ``trainmaster bench scheduler``.
* ``fragmentation``: time-weighted mean, over the time when some gang is queued and some
  GPU is free, of the share of free GPUs the head of the queue cannot use (free GPUs on
  nodes where fewer than one of its pods fits, and remainders smaller than a pod).
* ``preemptions``: victim gangs evicted (a gang evicted twice counts twice), as the
  scheduler's ``trainmaster_scheduler_preemptions_total`` counts them;
  ``lost_gpu_hours_preemption``: the work they lost (since their last checkpoints);
  ``lost_gpu_hours_failures`` likewise for node failures.
* ``ettr``: effective training time ratio, GPU-weighted: sum(GPUs x work) /
  sum(GPUs x (finish - first start)); 1.0 without failures.
* ``elastic`` (only when the workload has elastic jobs, ``min_pods``): how many, their
  mean JCT and the other (rigid) jobs' mean JCT, and the size changes (``rescales``). A
  run with ``--elastic off`` reports the same split, with the elastic jobs run rigid.
"""

from __future__ import annotations

import math
from array import array
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

LARGE_GPUS = 64


def percentile(values: Sequence[float], q: float) -> float | None:
    """Linear interpolation between closest ranks (numpy's default); None if empty."""
    if not values:
        return None
    ordered = sorted(values)
    pos = (len(ordered) - 1) * q / 100
    lo = math.floor(pos)
    hi = min(lo + 1, len(ordered) - 1)
    return ordered[lo] + (ordered[hi] - ordered[lo]) * (pos - lo)


@dataclass(slots=True)
class Series:
    """Samples after each event time, for the plots."""

    time: array[float] = field(default_factory=lambda: array("d"))
    allocation: array[float] = field(default_factory=lambda: array("d"))
    fragmentation: array[float] = field(default_factory=lambda: array("d"))
    """NaN when nothing waits or nothing is free."""


def _rounded(value: float | None, digits: int = 3) -> float | None:
    return None if value is None else round(value, digits)


@dataclass(frozen=True, slots=True)
class JobRow:
    """One job's run (``--jobs-out``); times in seconds of the run's clock."""

    name: str
    queue: str
    submit_s: float
    start_s: float
    """Its first start."""
    end_s: float
    preemptions: int
    lost_preempted_gpu_s: float
    failures: int
    lost_failed_gpu_s: float
    pods: int
    gpus: int
    nodes: int
    """Distinct nodes of its latest placement."""

    HEADER = ("name", "queue", "submit_s", "start_s", "end_s", "wait_s", "preemptions",
              "lost_gpu_s_preemption", "failures", "lost_gpu_s_failures", "pods", "gpus",
              "nodes")

    def cells(self) -> tuple[object, ...]:
        return (self.name, self.queue, round(self.submit_s, 3), round(self.start_s, 3),
                round(self.end_s, 3), round(self.start_s - self.submit_s, 3),
                self.preemptions, round(self.lost_preempted_gpu_s, 1), self.failures,
                round(self.lost_failed_gpu_s, 1), self.pods, self.gpus, self.nodes)


@dataclass(slots=True)
class QueueFigures:
    """One queue's share of a run (``--json``: ``results[].queues``)."""

    queue: str
    nominal_quota: int | None
    jobs: int
    gpu_seconds: float
    """GPU-seconds its jobs held, over all attempts."""
    span: float
    waiting_gpu_seconds: float
    """GPU-seconds its jobs held while some gang (of any queue) waited."""
    waiting: float
    """Seconds some gang waited (the policy's time base for ``gpu_allocation_waiting``)."""
    cluster_gpus: int
    waits: list[float]
    preempted: int
    lost_preempted_gpu_seconds: float
    fairness: Mapping[str, float | None] = field(default_factory=dict)
    """``weight``, ``entitlement``, ``share_busy``, ``contended_s``, ``jain_index``,
    ``owed_wait_s`` (``_fairness``), for a queue of a cohort of two or more."""

    def to_json(self) -> dict[str, Any]:
        whole = self.span * self.cluster_gpus
        run = round(self.gpu_seconds / whole, 4) if whole > 0 else 0.0
        waited = self.waiting * self.cluster_gpus
        return {
            "queue": self.queue,
            "nominal_quota": self.nominal_quota,
            "jobs": self.jobs,
            "gpu_allocation": run,
            "wait_p50_s": _rounded(percentile(self.waits, 50)),
            "wait_p95_s": _rounded(percentile(self.waits, 95)),
            "preempted": self.preempted,
            "gpu_allocation_waiting": (round(self.waiting_gpu_seconds / waited, 4)
                                       if waited > 0 else None),
            "gpu_allocation_run": run,
            "lost_gpu_hours_preemption": round(self.lost_preempted_gpu_seconds / 3600, 3),
            **self.fairness,
        }


@dataclass(slots=True)
class PolicyResult:
    policy: str
    gpus: int
    waits: list[float]
    job_gpus: list[int]
    jcts: list[float]
    split_jobs: int
    wait_seconds: float
    allocated_while_waiting: float
    allocated_total: float
    span: float
    fragmentation_integral: float
    fragmentation_seconds: float
    useful_gpu_seconds: float
    held_gpu_seconds: float
    jobs_finished: int
    failures: int
    restarts: int
    lost_gpu_seconds: float
    """Work lost to failures and preemptions."""
    lost_preempted_gpu_seconds: float
    series: Series
    wall_seconds: float = 0.0
    preemptions: int = 0
    queues: list[QueueFigures] | None = None
    """Per queue, when the simulation has queues (``--spec`` or ``--queues``)."""
    elastic_jobs: list[bool] | None = None
    """Per job, whether the trace makes it elastic; None when none is."""
    rescales: int = 0
    job_rows: list[JobRow] = field(default_factory=list)
    required_high_waits: list[float] | None = None
    """Waits of the highest-priority jobs required at a switch level (with preemption
    on): what domain-freeing preemption is for."""
    retries: dict[str, Any] | None = None
    """The scheduler's retry counters (``RetryStats.to_json``): who was tried, why."""

    @property
    def gpu_allocation_waiting(self) -> float | None:
        if self.wait_seconds > 0:
            return self.allocated_while_waiting / (self.wait_seconds * self.gpus)
        return None

    @property
    def gpu_allocation_run(self) -> float:
        return self.allocated_total / (self.span * self.gpus) if self.span > 0 else 0.0

    @property
    def gpu_allocation(self) -> float:
        waiting = self.gpu_allocation_waiting
        return self.gpu_allocation_run if waiting is None else waiting

    @property
    def fragmentation(self) -> float:
        if self.fragmentation_seconds <= 0:
            return 0.0
        return self.fragmentation_integral / self.fragmentation_seconds

    @property
    def ettr(self) -> float:
        return self.useful_gpu_seconds / self.held_gpu_seconds if self.held_gpu_seconds else 1.0

    def to_json(self) -> dict[str, Any]:
        large = [w for w, g in zip(self.waits, self.job_gpus, strict=True) if g >= LARGE_GPUS]
        jct = sum(self.jcts) / len(self.jcts) if self.jcts else 0.0
        rounded = _rounded
        failed = self.lost_gpu_seconds - self.lost_preempted_gpu_seconds
        return {
            "policy": self.policy,
            "gpu_allocation": round(self.gpu_allocation, 4),
            "wait_p50_s": rounded(percentile(self.waits, 50)),
            "wait_p95_s": rounded(percentile(self.waits, 95)),
            "wait_p95_large_s": rounded(percentile(large, 95)),
            "jct_mean_s": round(jct, 3),
            "gangs_split_beyond_needed": self.split_jobs,
            "fragmentation": round(self.fragmentation, 4),
            "preemptions": self.preemptions,
            "ettr": round(self.ettr, 4),
            "jobs_finished": self.jobs_finished,
            "gpu_allocation_waiting": _rounded(self.gpu_allocation_waiting, 4),
            "gpu_allocation_run": round(self.gpu_allocation_run, 4),
            "span_s": round(self.span, 3),
            "waiting_s": round(self.wait_seconds, 3),
            "lost_gpu_hours_preemption": round(self.lost_preempted_gpu_seconds / 3600, 3),
            "lost_gpu_hours_failures": round(max(failed, 0.0) / 3600, 3),
            "node_failures": self.failures,
            "restarts": self.restarts,
            **({"queues": [q.to_json() for q in self.queues]} if self.queues is not None
               else {}),
            **({"elastic": self._elastic_json()} if self.elastic_jobs is not None else {}),
            **({"preemption": self._preemption_json(self.required_high_waits)}
               if self.required_high_waits is not None else {}),
            **({"retries": self.retries} if self.retries is not None else {}),
        }

    def _preemption_json(self, waits: list[float]) -> dict[str, Any]:
        return {
            "lost_gpu_hours": round(self.lost_gpu_seconds / 3600, 3),
            "required_high_priority_jobs": len(waits),
            "required_high_priority_wait_mean_s": (round(sum(waits) / len(waits), 3)
                                                   if waits else None),
        }

    def _elastic_json(self) -> dict[str, Any]:
        flags = self.elastic_jobs or []
        mine = [j for j, e in zip(self.jcts, flags, strict=True) if e]
        others = [j for j, e in zip(self.jcts, flags, strict=True) if not e]
        return {
            "jobs": len(mine),
            "jct_mean_s": round(sum(mine) / len(mine), 3) if mine else None,
            "rigid_jct_mean_s": round(sum(others) / len(others), 3) if others else None,
            "rescales": self.rescales,
        }
