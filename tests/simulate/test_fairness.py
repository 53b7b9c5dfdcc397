"""Fair sharing in the simulator: the scheduler's DRF admission and preemption, and the
per-queue fairness figures (``entitlement``, ``share_busy``, ``jain_index``,
``owed_wait_s``)."""

from __future__ import annotations

import pytest

from trainmaster.scheduler import GPU, CohortSpec, FairSharing, QueueSpec, ResourceQuota
from trainmaster.simulate import POLICIES, QueueConfig, Simulation, bench_cluster, parse_trace
from trainmaster.simulate._fairness import FairnessMeter, jain


def _weighted(preemption: bool) -> QueueConfig:
    """Two queues without quota of their own, weights 1 and 3, borrowing a 32-GPU cohort."""
    return QueueConfig(
        (QueueSpec("light", 0, cohort="lab", weight=1),
         QueueSpec("heavy", 0, cohort="lab", weight=3)),
        preemption=preemption, source="test",
        cohorts=(CohortSpec("lab", None, {GPU: ResourceQuota(32)}),),
        fair=FairSharing(True))


def _saturated() -> str:
    rows = ["id,submit_s,duration_s,pods,gpus_per_pod,queue"]
    for queue in ("light", "heavy"):  # each submits 4x what the cluster can run at once
        rows += [f"{queue}{i},0,{600 + 37 * i},1,8,{queue}" for i in range(16)]
    return "\n".join(rows)


@pytest.mark.parametrize("preemption", [False, True])
def test_the_busy_gpu_time_splits_by_weight(preemption: bool) -> None:
    jobs = parse_trace(_saturated().splitlines())
    sim = Simulation(bench_cluster(4), jobs, "trainmaster", POLICIES["trainmaster"],
                     queues=_weighted(preemption), check=True)
    result = sim.run().to_json()
    figures = {q["queue"]: q for q in result["queues"]}
    assert figures["light"]["entitlement"] == 0.25 and figures["heavy"]["entitlement"] == 0.75
    assert figures["light"]["share_busy"] == pytest.approx(0.25, abs=0.05)
    assert figures["heavy"]["share_busy"] == pytest.approx(0.75, abs=0.05)
    assert figures["light"]["jain_index"] > 0.99


def test_without_fair_sharing_first_come_takes_the_cohort() -> None:
    config = _weighted(False)
    fifo = QueueConfig(config.queues, source="test", cohorts=config.cohorts)
    rows = ["id,submit_s,duration_s,pods,gpus_per_pod,queue"]
    rows += [f"light{i},0,600,1,8,light" for i in range(8)]
    rows += [f"heavy{i},1,600,1,8,heavy" for i in range(8)]
    sim = Simulation(bench_cluster(4), parse_trace(rows), "trainmaster",
                     POLICIES["trainmaster"], queues=fifo, check=True)
    figures = {q["queue"]: q for q in sim.run().to_json()["queues"]}
    assert figures["light"]["share_busy"] == 1.0  # it came first and held all 32 GPUs
    assert figures["heavy"]["owed_wait_s"] > 0  # heavy waited below its 75 %


def test_jains_index() -> None:
    assert jain([1.0, 1.0, 1.0]) == 1.0
    assert jain([1.0, 0.0]) == 0.5
    assert jain([]) is None


def test_only_queues_with_work_waiting_contend() -> None:
    """An idle lender neither contends nor dilutes; a queue that holds GPUs without
    waiting is not contending, but counts for who is owed."""
    config = QueueConfig(
        (QueueSpec("lender", 32, cohort="lab", weight=1),
         QueueSpec("light", 0, cohort="lab", weight=1),
         QueueSpec("heavy", 0, cohort="lab", weight=3)),
        source="test", fair=FairSharing(True))
    meter = FairnessMeter(config)
    held = {"lender": 0, "light": 8, "heavy": 24}
    meter.advance(100.0, held.__getitem__, {"light", "heavy"})
    # light holds 24 of 32 while heavy waits: light is above its 1/4, heavy owed.
    held = {"lender": 0, "light": 24, "heavy": 8}
    meter.advance(50.0, held.__getitem__, {"heavy"})
    light, heavy, lender = (meter.figures(q) for q in ("light", "heavy", "lender"))
    assert (light["entitlement"], heavy["entitlement"]) == (0.25, 0.75)
    assert (light["share_busy"], heavy["share_busy"]) == (0.25, 0.75)
    assert light["contended_s"] == heavy["contended_s"] == 100.0
    assert (light["owed_wait_s"], heavy["owed_wait_s"]) == (0.0, 50.0)
    assert lender["entitlement"] is None and lender["share_busy"] is None
    assert light["jain_index"] == 1.0
