"""A synthetic workload shaped like published GPU-cluster traces (see docs/simulate.md).

Sizes: most jobs take 1-8 GPUs on one node; a heavy tail of multi-node jobs (8-GPU pods)
doubles in size with geometrically falling probability up to 4,096 GPUs, capped at half
the cluster. Durations: log-normal, longer for larger jobs. Arrivals: Poisson, at the
rate at which the work that can run **while jobs arrive** offers ``load`` x the cluster's
GPU-seconds per second (see ``arrival_rate``). Same seed, same jobs.
"""

from __future__ import annotations

import math
import random

from ._jobs import Job, WorkloadError

# (GPUs, weight). Single-node shares follow the qualitative shape in Philly (Jeon et al.,
# ATC'19) and Helios (Hu et al., SC'21): single-GPU jobs are the majority; the multi-node
# tail halves per doubling, so few jobs but a large share of GPU time is in it, as all
# three traces (with Alibaba PAI, Weng et al., NSDI'22) report.
SIZE_WEIGHTS: tuple[tuple[int, float], ...] = (
    (1, 0.55), (2, 0.10), (4, 0.10), (8, 0.13),
    (16, 0.045), (32, 0.030), (64, 0.018), (128, 0.011), (256, 0.0065),
    (512, 0.0035), (1024, 0.0018), (2048, 0.0009), (4096, 0.0005),
)  # fmt: skip
MEDIAN_SECONDS = 1800.0
"""Median duration of a 1-GPU job; log-normal with ``SIGMA``."""
SIGMA = 1.6
SIZE_FACTOR = 0.25
"""The median grows by this fraction per doubling of GPUs (large jobs run longer)."""
MAX_SECONDS = 7 * 86400.0


def job_size(rng: random.Random, max_gpus: int) -> int:
    sizes = [(g, w) for g, w in SIZE_WEIGHTS if g <= max_gpus] or [(1, 1.0)]
    total = sum(w for _, w in sizes)
    pick = rng.random() * total
    for gpus, weight in sizes:
        pick -= weight
        if pick < 0:
            return gpus
    return sizes[-1][0]


def duration(rng: random.Random, gpus: int) -> float:
    median = MEDIAN_SECONDS * (1 + SIZE_FACTOR * math.log2(gpus))
    return round(min(MAX_SECONDS, max(60.0, rng.lognormvariate(math.log(median), SIGMA))), 1)


def offered_in_window(shapes: list[tuple[int, float]], arrivals: list[float],
                      rate: float) -> float:
    """GPU-seconds the jobs can run between their arrival and the last arrival, per
    GPU-second of that window (divide by the cluster's GPUs for the load), with the
    jobs arriving at ``arrivals`` (unit-rate times) / ``rate``."""
    last = arrivals[-1]
    if last <= 0:
        return math.inf
    # sum g * min(d, (last - a) / rate) over the window last / rate:
    return sum(g * min(d * rate, last - a) for (g, d), a in zip(shapes, arrivals,
                                                               strict=True)) / last


def arrival_rate(shapes: list[tuple[int, float]], arrivals: list[float], cluster_gpus: int,
                 load: float) -> float:
    """Jobs per second such that the work the jobs can do **before the last one arrives**
    asks ``load`` x the cluster.

    Counting each job's whole work (GPUs x duration) instead, as this generator did
    until it was found wrong at scale, counts the heavy tail's week-long jobs as if
    they all ran inside the arrival window: at 10,000 nodes and 100,000 jobs the load
    0.9 so computed offered 0.72 inside the window and no work waited; at 1,000 nodes
    and 10,000 jobs, 0.50. The whole-work rate is the lower bound of the search; a
    load that the jobs cannot offer even all at once gets the highest rate tried."""
    mean_work = sum(g * d for g, d in shapes) / len(shapes)
    low = load * cluster_gpus / mean_work
    target = load * cluster_gpus
    if offered_in_window(shapes, arrivals, low) >= target:
        return low
    high = low * 2
    while offered_in_window(shapes, arrivals, high) < target and high < low * 1e4:
        high *= 2
    for _ in range(40):  # bisection to 1e-12 of the range: the sum is monotone in rate
        mid = (low + high) / 2
        if offered_in_window(shapes, arrivals, mid) < target:
            low = mid
        else:
            high = mid
    return high


def synthetic_jobs(
    jobs: int, seed: int, cluster_gpus: int, gpus_per_node: int = 8, load: float = 0.9,
    largest: int | None = None,
) -> list[Job]:
    """``jobs`` jobs offering ``load`` x ``cluster_gpus`` while they arrive (see
    ``arrival_rate``); ``largest``: no size above it is drawn (the queues' ceiling)."""
    if jobs < 1:
        raise WorkloadError("--jobs must be at least 1")
    if not 0 < load <= 10:
        raise WorkloadError(f"--load must be in (0, 10], got {load}")
    rng = random.Random(seed)
    max_gpus = max(1, cluster_gpus // 2 if largest is None else min(cluster_gpus // 2, largest))
    shapes = []
    for _ in range(jobs):
        gpus = job_size(rng, max_gpus)
        shapes.append((gpus, duration(rng, gpus)))
    # Unit-rate Poisson arrivals, scaled by the rate once it is known.
    arrivals = [0.0]
    for _ in range(jobs - 1):
        arrivals.append(arrivals[-1] + rng.expovariate(1.0))
    rate = arrival_rate(shapes, arrivals, cluster_gpus, load)
    out: list[Job] = []
    for n, ((gpus, seconds), at) in enumerate(zip(shapes, arrivals, strict=True)):
        if gpus <= gpus_per_node:
            pods, per_pod = 1, gpus
        else:
            pods, per_pod = math.ceil(gpus / gpus_per_node), gpus_per_node
        out.append(Job(f"s{n}", round(at / rate, 3), seconds, pods, per_pod))
    return out
