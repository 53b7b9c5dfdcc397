"""Run the workload under each policy and collect the results: one after the other, or in
forked worker processes, one run each (the runs share nothing, so the results are the same;
with four policies on two cores the wall time roughly halves)."""

from __future__ import annotations

import functools
import multiprocessing
import os
import time
from collections.abc import Callable, Sequence
from concurrent.futures import ProcessPoolExecutor
from dataclasses import dataclass
from typing import Any

from ._cluster import SimCluster
from ._elastic import ElasticModel
from ._engine import Progress, Simulation
from ._faults import FaultModel
from ._jobs import Job
from ._metrics import PolicyResult
from ._policies import POLICIES
from ._queues import QueueConfig


@dataclass(frozen=True, slots=True)
class SimulationResult:
    nodes: int
    gpus: int
    jobs: int
    wall_seconds: float
    results: tuple[PolicyResult, ...]

    def to_json(self) -> dict[str, Any]:
        return {
            "nodes": self.nodes,
            "gpus": self.gpus,
            "jobs": self.jobs,
            "wall_seconds": round(self.wall_seconds, 3),
            "results": [r.to_json() for r in self.results],
        }


PREEMPTION_SEARCHES = ("domain", "greedy", "compare")


def simulate(
    cluster: SimCluster,
    jobs: Sequence[Job],
    policies: Sequence[str],
    faults: FaultModel = FaultModel(),
    *,
    queues: QueueConfig = QueueConfig(),
    check: bool = False,
    progress: Progress | None = None,
    elastic: ElasticModel | None = ElasticModel(),
    compare_elastic: bool = False,
    preemption_search: str = "domain",
    workers: int = 1,
) -> SimulationResult:
    """``elastic``: how elastic jobs run (None: every job rigid); ``compare_elastic``:
    each policy twice, ``<policy>/elastic`` and ``<policy>/rigid``. ``preemption_search``:
    ``domain`` (the scheduler's), ``greedy`` (the victim order before domain-freeing
    preemption) or ``compare`` (each policy twice, ``<policy>/domain`` and
    ``<policy>/greedy``). ``workers``: runs at once, each in a forked process (0: one per
    CPU, at most one per run)."""
    if preemption_search not in PREEMPTION_SEARCHES:
        raise ValueError(f"preemption search must be one of "
                         f"{', '.join(PREEMPTION_SEARCHES)}, got {preemption_search!r}")
    started = time.perf_counter()
    runs: list[tuple[str, str, ElasticModel | None]] = [(name, name, elastic)
                                                        for name in policies]
    if compare_elastic:
        model = elastic or ElasticModel()
        runs = [(f"{name}/{label}", name, how) for name in policies
                for label, how in (("elastic", model), ("rigid", None))]
    searches = ([("/domain", True), ("/greedy", False)] if preemption_search == "compare"
                else [("", preemption_search == "domain")])
    def one(label: str, name: str, how: ElasticModel | None, domain: bool) -> PolicyResult:
        sim = Simulation(cluster, jobs, label, POLICIES[name], faults,
                         queues=queues, check=check, progress=progress, elastic=how,
                         domain_search=domain)
        result = sim.run()
        if progress is not None:
            progress(f"{label}: {result.jobs_finished} jobs in {result.wall_seconds:.1f} s")
        return result

    todo: list[Callable[[], PolicyResult]] = [
        functools.partial(one, label + suffix, name, how, domain)
        for (label, name, how), (suffix, domain) in [(r, s) for r in runs for s in searches]]
    width = min(len(todo), workers if workers > 0 else os.cpu_count() or 1)
    results = [run() for run in todo] if width <= 1 else _in_processes(todo, width)
    return SimulationResult(len(cluster.nodes), cluster.gpus, len(jobs),
                            time.perf_counter() - started, tuple(results))


_FORKED: list[Callable[[], PolicyResult]] = []
"""The runs a forked worker inherits (closures over the workload: forked, not pickled)."""


def _forked_run(index: int) -> PolicyResult:
    return _FORKED[index]()


def _in_processes(todo: list[Callable[[], PolicyResult]], width: int) -> list[PolicyResult]:
    """Each run in a forked worker; results in the runs' order. Fork, not spawn: the
    workload and cluster are inherited instead of pickled."""
    _FORKED[:] = todo
    try:
        context = multiprocessing.get_context("fork")
        with ProcessPoolExecutor(max_workers=width, mp_context=context) as pool:
            return list(pool.map(_forked_run, range(len(todo))))
    finally:
        _FORKED.clear()
