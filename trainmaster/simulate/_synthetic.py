"""A synthetic workload shaped like published GPU-cluster traces (see docs/simulate.md).

Sizes: most jobs take 1-8 GPUs on one node; a heavy tail of multi-node jobs (8-GPU pods)
doubles in size with geometrically falling probability up to 4,096 GPUs, capped at half
the cluster. Durations: log-normal, longer for larger jobs. Arrivals: Poisson, at the
rate that offers ``load`` x the cluster's GPU-seconds per second. Same seed, same jobs.
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


def synthetic_jobs(
    jobs: int, seed: int, cluster_gpus: int, gpus_per_node: int = 8, load: float = 0.9
) -> list[Job]:
    """``jobs`` jobs offering ``load`` x ``cluster_gpus`` on average (see module doc)."""
    if jobs < 1:
        raise WorkloadError("--jobs must be at least 1")
    if not 0 < load <= 10:
        raise WorkloadError(f"--load must be in (0, 10], got {load}")
    rng = random.Random(seed)
    max_gpus = max(1, cluster_gpus // 2)
    shapes = []
    for _ in range(jobs):
        gpus = job_size(rng, max_gpus)
        shapes.append((gpus, duration(rng, gpus)))
    mean_work = sum(g * d for g, d in shapes) / jobs
    rate = load * cluster_gpus / mean_work  # jobs per second
    out: list[Job] = []
    now = 0.0
    for n, (gpus, seconds) in enumerate(shapes):
        if gpus <= gpus_per_node:
            pods, per_pod = 1, gpus
        else:
            pods, per_pod = math.ceil(gpus / gpus_per_node), gpus_per_node
        out.append(Job(f"s{n}", round(now, 3), seconds, pods, per_pod))
        now += rng.expovariate(rate)
    return out
