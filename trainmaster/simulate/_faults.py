"""Node failures: a seeded Poisson process over the whole cluster, the same for every policy.

A cluster of N nodes with a per-node MTBF of H hours fails about N / H times an hour;
the next failure is exponential with that rate and hits a uniformly drawn node. The draws
never depend on the simulation's state, so every policy sees the same failures.
"""

from __future__ import annotations

import random
from dataclasses import dataclass


@dataclass(frozen=True, slots=True)
class FaultModel:
    node_mtbf_hours: float | None = None
    """None or 0: no failures."""
    repair_minutes: float = 60.0
    """A failed node is back this long after it failed."""
    checkpoint_minutes: float = 30.0
    """A job saves its progress this often (of run time); 0: never, all work is lost."""
    restart_seconds: float = 300.0
    """From a job's failure to its gang being queued again."""
    seed: int = 0

    def __post_init__(self) -> None:
        for name in ("repair_minutes", "checkpoint_minutes", "restart_seconds"):
            if getattr(self, name) < 0:
                raise ValueError(f"{name} must be >= 0")
        if self.node_mtbf_hours is not None and self.node_mtbf_hours < 0:
            raise ValueError("node_mtbf_hours must be >= 0")

    @property
    def enabled(self) -> bool:
        return bool(self.node_mtbf_hours)

    def saved_work(self, ran_seconds: float, interval_s: float | None = None) -> float:
        """Work kept at a failure after ``ran_seconds`` of running: the last checkpoint
        (every ``interval_s`` seconds when the job has its own, a trace's
        ``checkpoint_s``; else every ``checkpoint_minutes``)."""
        step = self.checkpoint_minutes * 60 if interval_s is None else interval_s
        if step <= 0:
            return 0.0
        return (ran_seconds // step) * step


class FailureClock:
    """Successive (time, node index) failures for ``nodes`` nodes."""

    def __init__(self, model: FaultModel, nodes: int) -> None:
        self._rng = random.Random(f"failures-{model.seed}")
        self._nodes = nodes
        hours = model.node_mtbf_hours or 0.0
        self._rate = nodes / (hours * 3600) if hours > 0 else 0.0
        self._now = 0.0

    def next(self) -> tuple[float, int] | None:
        if self._rate <= 0:
            return None
        self._now += self._rng.expovariate(self._rate)
        return self._now, self._rng.randrange(self._nodes)
