"""The synthetic generator's load: the work that can run while the jobs arrive."""

from __future__ import annotations

import pytest

from trainmaster.simulate import Job
from trainmaster.simulate._synthetic import synthetic_jobs


def _offered(jobs: list[Job], gpus: int) -> float:
    """GPU-seconds of work that can run between each job's arrival and the last one's,
    per GPU-second of that window."""
    end = max(j.submit_s for j in jobs)
    window = sum(j.pods * j.gpus_per_pod * min(j.duration_s, end - j.submit_s) for j in jobs)
    return window / (end * gpus)


@pytest.mark.parametrize(("nodes", "count", "seed", "load"),
                         [(1000, 10_000, 7, 0.9), (10_000, 20_000, 7, 0.9), (200, 4000, 1, 1.2)])
def test_the_load_is_offered_inside_the_arrival_window(nodes: int, count: int, seed: int,
                                                        load: float) -> None:
    gpus = nodes * 8
    jobs = synthetic_jobs(count, seed, gpus, 8, load)
    # Rounding of submit times (ms) is all that separates it from the load asked. The
    # generator used to count each job's whole (up to week-long) work as offered: its
    # load 0.9 offered 0.50 inside the window at 1,000 nodes, 0.72 at 10,000 (seed 7).
    assert _offered(jobs, gpus) == pytest.approx(load, rel=1e-3)


def test_same_seed_same_jobs_and_sizes_do_not_depend_on_the_load() -> None:
    a = synthetic_jobs(500, 3, 800, 8, 0.9)
    assert a == synthetic_jobs(500, 3, 800, 8, 0.9)
    b = synthetic_jobs(500, 3, 800, 8, 1.8)
    assert [(j.pods, j.gpus_per_pod, j.duration_s) for j in a] == \
        [(j.pods, j.gpus_per_pod, j.duration_s) for j in b]
    # Twice the load, arrivals at least as compressed: never slower.
    assert max(j.submit_s for j in b) < max(j.submit_s for j in a)


def test_one_job_arrives_at_zero() -> None:
    [job] = synthetic_jobs(1, 1, 80)
    assert job.submit_s == 0
