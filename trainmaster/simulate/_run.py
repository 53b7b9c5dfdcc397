"""Run the workload under each policy, one after the other, and collect the results."""

from __future__ import annotations

import time
from collections.abc import Sequence
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
) -> SimulationResult:
    """``elastic``: how elastic jobs run (None: every job rigid); ``compare_elastic``:
    each policy twice, ``<policy>/elastic`` and ``<policy>/rigid``. ``preemption_search``:
    ``domain`` (the scheduler's), ``greedy`` (the victim order before domain-freeing
    preemption) or ``compare`` (each policy twice, ``<policy>/domain`` and
    ``<policy>/greedy``)."""
    if preemption_search not in PREEMPTION_SEARCHES:
        raise ValueError(f"preemption search must be one of "
                         f"{', '.join(PREEMPTION_SEARCHES)}, got {preemption_search!r}")
    started = time.perf_counter()
    results = []
    runs: list[tuple[str, str, ElasticModel | None]] = [(name, name, elastic)
                                                        for name in policies]
    if compare_elastic:
        model = elastic or ElasticModel()
        runs = [(f"{name}/{label}", name, how) for name in policies
                for label, how in (("elastic", model), ("rigid", None))]
    searches = ([("/domain", True), ("/greedy", False)] if preemption_search == "compare"
                else [("", preemption_search == "domain")])
    for (label, name, how), (suffix, domain) in [(r, s) for r in runs for s in searches]:
        sim = Simulation(cluster, jobs, label + suffix, POLICIES[name], faults,
                         queues=queues, check=check, progress=progress, elastic=how,
                         domain_search=domain)
        result = sim.run()
        if progress is not None:
            progress(f"{label}{suffix}: {result.jobs_finished} jobs in "
                     f"{result.wall_seconds:.1f} s")
        results.append(result)
    return SimulationResult(len(cluster.nodes), cluster.gpus, len(jobs),
                            time.perf_counter() - started, tuple(results))
