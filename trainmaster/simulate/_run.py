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
) -> SimulationResult:
    """``elastic``: how elastic jobs run (None: every job rigid); ``compare_elastic``:
    each policy twice, ``<policy>/elastic`` and ``<policy>/rigid``."""
    started = time.perf_counter()
    results = []
    runs: list[tuple[str, str, ElasticModel | None]] = [(name, name, elastic)
                                                        for name in policies]
    if compare_elastic:
        model = elastic or ElasticModel()
        runs = [(f"{name}/{label}", name, how) for name in policies
                for label, how in (("elastic", model), ("rigid", None))]
    for label, name, how in runs:
        sim = Simulation(cluster, jobs, label, POLICIES[name], faults, queues=queues,
                         check=check, progress=progress, elastic=how)
        result = sim.run()
        if progress is not None:
            progress(f"{label}: {result.jobs_finished} jobs in {result.wall_seconds:.1f} s")
        results.append(result)
    return SimulationResult(len(cluster.nodes), cluster.gpus, len(jobs),
                            time.perf_counter() - started, tuple(results))
