"""The speed work keeps every decision: per-job starts, finishes and nodes equal those of
the code before it, on a small seed-fixed saturated workload, for every policy.

The digests below were made with the simulator and placement core of commit 14c8337
(before the spread speed-up: ``reservation_target``'s all-reserved answer, the guard's
slot memo) by ``_table`` as written here. They cover the path the speed-up changed:
the workload saturates the cluster so that starving gangs reserve every node (counted).
"""

from __future__ import annotations

import hashlib

import pytest

import trainmaster.scheduler.placement.reservation as reservation
from trainmaster.scheduler import Placement
from trainmaster.simulate import POLICIES, FaultModel, Simulation, bench_cluster, synthetic_jobs

BEFORE = {
    "trainmaster":
        "26816864577328db9fe46492006ceba58d0ce314955e5ed2a080bf67ffe25c9a",
    "first-fit":
        "444b066ea09b294e6a7a8352213095af3e9a19eabc63cc0d104d3be00d875488",
    "spread":
        "b07b2e244597e15d8f7a4e8a9d83105740050aa5bd5f5998070e6d6a0bb1aa80",
    "slurm-tree":
        "f61ee5577f47cba0f4fbd9a8999c50e95525bfd6c836b148aeb5759ebdbdcc7a",
}


class _Recording(Simulation):
    """The simulation, recording each start: (job, virtual time, sorted (pod, node))."""

    starts: list[tuple[int, float, tuple[tuple[str, str], ...]]]

    def bind(self, placement: Placement) -> None:
        index = self.queued[placement.gang]
        pods = tuple(sorted((b.pod.name, b.node) for b in placement.bindings))
        self.starts.append((index, self.now, pods))
        super().bind(placement)


def _table(policy: str) -> str:
    cluster = bench_cluster(40)
    jobs = synthetic_jobs(400, 7, cluster.gpus, load=0.9)
    faults = FaultModel(node_mtbf_hours=2000, checkpoint_minutes=30)
    sim = _Recording(cluster, jobs, policy, POLICIES[policy], faults)
    sim.starts = []
    sim.run()
    rows = [f"start,{i},{t:.3f},{';'.join(f'{p}@{n}' for p, n in pods)}"
            for i, t, pods in sim.starts]
    rows += [f"job,{k},{r.first_start:.3f},{r.finished:.3f},{r.split:d}"
             for k, r in enumerate(sim.runs)]
    return "\n".join(rows)


@pytest.mark.parametrize("policy", list(POLICIES))
def test_decisions_equal_those_before_the_speed_up(
    policy: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    answered = 0
    inner = reservation._too_few_unblocked

    def counting(*args: object) -> bool:
        nonlocal answered
        found = inner(*args)  # type: ignore[arg-type]
        answered += found
        return found

    monkeypatch.setattr(reservation, "_too_few_unblocked", counting)
    digest = hashlib.sha256(_table(policy).encode()).hexdigest()
    assert answered > 0, "the workload no longer reserves every node: pick a busier one"
    assert digest == BEFORE[policy]
