"""A job of the workload: when it arrives, how long it runs, how many pods of how many GPUs."""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass

from trainmaster.api import GangShape, SizeRule, gang_shape
from trainmaster.errors import TrainmasterError
from trainmaster.scheduler import TopologyConstraint


class WorkloadError(TrainmasterError):
    """A trace, a synthetic workload or a cluster cannot be simulated (exit 1)."""


@dataclass(frozen=True, slots=True)
class Job:
    id: str
    submit_s: float
    duration_s: float
    """Work to do: run time without interruptions."""
    pods: int
    gpus_per_pod: int
    queue: str = "default"
    """Its queue (``_queues``: quota, borrowing, preemption when the queues have them)."""
    priority: int | None = None
    """None: its queue's priority (0 without queues)."""
    topology: TopologyConstraint | None = None
    """None: the scheduler's default policy by gang size."""
    line: int = 0
    """Line in the trace file (0 for synthetic jobs), for error messages."""
    min_pods: int | None = None
    """An elastic job's fewest pods (``pods`` is then its most, and ``duration_s`` its
    work at ``pods``); None: rigid."""
    checkpoint_s: float | None = None
    """How often it writes a checkpoint, in seconds of run time (0: never); None: the
    run's ``--checkpoint-minutes``. What a failure or a preemption loses, and the price
    of evicting it."""

    @property
    def gpus(self) -> int:
        return self.pods * self.gpus_per_pod

    @property
    def elastic(self) -> bool:
        return self.min_pods is not None and self.min_pods < self.pods

    def gang(self, policy: Iterable[SizeRule], elastic: bool = False) -> GangShape:
        """What it asks the scheduler for: the mapping the operator's PodGroups use too
        (``elastic``: with its range, when the run honours it)."""
        own = (self.topology.level, self.topology.mode.value) if self.topology else None
        span = (self.min_pods or self.pods, self.pods) if elastic and self.elastic else None
        return gang_shape(self.pods, self.gpus_per_pod, self.queue, self.priority, own, policy,
                          span)

    def where(self) -> str:
        return f"job {self.id!r}" + (f" (line {self.line})" if self.line else "")
