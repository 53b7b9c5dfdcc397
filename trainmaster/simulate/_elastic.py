"""How an elastic job runs in the simulation: its speed at a size, and what a rescale
costs (docs/simulate.md, "Elastic jobs").

* **Throughput.** A job's ``duration_s`` is its work at its full size (``pods``). At
  ``k`` of ``n`` pods it progresses at ``(k / n) ** exponent`` of that speed: 1.0 is
  linear in pods (perfect data-parallel scaling); below 1.0 a job scales sub-linearly,
  so fewer pods do relatively more work each.
* **Rescale.** Every size change (admission is not one; a shrink by node loss or
  preemption, a grow) stops the job's progress for ``rescale_seconds``: the ranks
  re-rendezvous and load the newest checkpoint at the new world size. The same figure
  prices a shrink in preemption's victim search (``rescale_cost``).
"""

from __future__ import annotations

import dataclasses
import random
from collections.abc import Sequence
from dataclasses import dataclass

from trainmaster.scheduler import DEFAULT_RESCALE_SECONDS

from ._jobs import Job

MODES = ("trace", "off", "compare")
"""``--elastic``: honour the trace's ``min_pods``; run every job rigid at ``pods``; both."""


@dataclass(frozen=True, slots=True)
class ElasticModel:
    exponent: float = 1.0
    rescale_seconds: float = DEFAULT_RESCALE_SECONDS

    def __post_init__(self) -> None:
        if not 0.0 < self.exponent <= 1.0:
            raise ValueError(f"--scaling-exponent must be in (0, 1], got {self.exponent}")
        if self.rescale_seconds < 0:
            raise ValueError(f"--rescale-seconds must be >= 0, got {self.rescale_seconds}")

    def speed(self, pods: int, full: int) -> float:
        """Work per second at ``pods`` of ``full`` pods (1.0 at full size)."""
        if pods >= full:
            return 1.0
        return float((pods / full) ** self.exponent)


def make_elastic(jobs: Sequence[Job], share: float, seed: int) -> list[Job]:
    """``jobs`` with a seeded ``share`` of the multi-pod ones made elastic, from half
    their pods (rounded up) to all of them: a synthetic workload's ``min_pods``."""
    if not 0.0 <= share <= 1.0:
        raise ValueError(f"--elastic-share must be in [0, 1], got {share}")
    rng = random.Random(f"elastic-{seed}")
    out = []
    for job in jobs:
        if job.pods > 1 and job.min_pods is None and rng.random() < share:
            job = dataclasses.replace(job, min_pods=(job.pods + 1) // 2)
        out.append(job)
    return out
