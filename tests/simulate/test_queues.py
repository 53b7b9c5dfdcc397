"""Queues in the simulation: the scheduler's quota, borrowing and preemption, by hand."""

from __future__ import annotations

import dataclasses

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from trainmaster.scheduler import QueueSpec
from trainmaster.simulate import (
    POLICIES,
    FaultModel,
    Job,
    QueueConfig,
    Simulation,
    WorkloadError,
    bench_cluster,
    parse_trace,
    synthetic_jobs,
)

# A borrows at most 8 beyond its 8; B (16) may borrow whatever the cohort leaves idle.
COHORT = QueueConfig(
    (QueueSpec("a", nominal_quota=8, borrowing_limit=8, cohort="c"),
     QueueSpec("b", nominal_quota=16, cohort="c")),
    source="test",
)

QUOTA_TRACE = """id,submit_s,duration_s,pods,gpus_per_pod,queue
a1,0,100,1,8,a
a2,0,100,1,8,a
a3,0,50,1,8,a
b1,10,30,1,8,b
b2,20,30,2,8,b
"""


@pytest.mark.parametrize("policy", list(POLICIES))
def test_quota_and_borrowing_by_hand(policy: str) -> None:
    # 6 nodes, 48 GPUs: capacity never holds anyone, the queues do.
    # t=0: a1 within a's 8; a2 borrows 8 (cohort idle 24-8=16); a3 would make 24 > 8+8: waits.
    # t=10: b1 within b's 16. t=20: b2 would make b 24 > 16 and the cohort has 24-24=0
    # idle: waits, though 24 GPUs are free. t=40: b1 ends, b2 fits b's 16 (wait 20).
    # t=100: a1, a2 end; a3 starts (wait 100), although 16 GPUs were free from t=70.
    jobs = parse_trace(QUOTA_TRACE.splitlines())
    sim = Simulation(bench_cluster(6), jobs, policy, POLICIES[policy], queues=COHORT,
                     check=True)
    result = sim.run()
    assert result.waits == [0, 0, 100, 0, 20]
    assert result.jcts == [100, 100, 150, 30, 50]
    assert result.preemptions == 0 and result.jobs_finished == 5
    out = result.to_json()
    # a held 8x100 + 8x100 + 8x50, b 8x30 + 16x30 GPU-seconds, of 48 GPUs x 150 s.
    # Work waited over 0-100 (a3; b2 over 20-40): a held 16 GPUs throughout, b all its
    # 720 GPU-seconds (b1 10-40, b2 40-70); whole run and while waiting, the queues sum to
    # the policy's.
    assert out["queues"] == [
        {"queue": "a", "nominal_quota": 8, "jobs": 3,
         "gpu_allocation": round(2000 / (48 * 150), 4), "wait_p50_s": 0.0,
         "wait_p95_s": 90.0, "preempted": 0,
         "gpu_allocation_waiting": round(1600 / (48 * 100), 4),
         "gpu_allocation_run": round(2000 / (48 * 150), 4), "lost_gpu_hours_preemption": 0.0},
        {"queue": "b", "nominal_quota": 16, "jobs": 2,
         "gpu_allocation": round(720 / (48 * 150), 4), "wait_p50_s": 10.0,
         "wait_p95_s": 19.0, "preempted": 0,
         "gpu_allocation_waiting": round(720 / (48 * 100), 4),
         "gpu_allocation_run": round(720 / (48 * 150), 4), "lost_gpu_hours_preemption": 0.0},
    ]
    assert out["gpu_allocation_waiting"] == round(2320 / (48 * 100), 4)
    assert out["gpu_allocation_run"] == round(2720 / (48 * 150), 4)
    # The same trace without queues: nobody waits (48 GPUs hold all five at once).
    free = Simulation(bench_cluster(6), jobs, policy, POLICIES[policy], check=True).run()
    assert free.waits == [0, 0, 0, 0, 0]
    assert "queues" not in free.to_json()


PRIORITY_TRACE = """id,submit_s,duration_s,pods,gpus_per_pod,queue,priority
low,0,3600,2,8,,0
high,1000,600,1,8,,10
"""


@pytest.mark.parametrize("policy", list(POLICIES))
def test_preemption_loses_the_work_since_the_last_checkpoint(policy: str) -> None:
    # 16 GPUs. low (16 GPUs) runs from 0. high (8 GPUs, priority 10) arrives at 1000 and
    # fits nowhere: low is evicted whole. Checkpoints every 300 s: low saved 900 s and
    # loses 100 s x 16 GPUs. high runs 1000-1600; low is queued again at 1060 (restart
    # 60 s), waits for high, resumes at 1600 with 2700 s to go and ends at 4300, once.
    queues = QueueConfig((QueueSpec("default"),), preemption=True, source="test")
    faults = FaultModel(checkpoint_minutes=5, restart_seconds=60)
    sim = Simulation(bench_cluster(2), parse_trace(PRIORITY_TRACE.splitlines()), policy,
                     POLICIES[policy], faults, queues=queues, check=True)
    result = sim.run()
    assert result.preemptions == 1
    assert result.lost_gpu_seconds == 100 * 16
    assert result.restarts == 0 and result.failures == 0  # a preemption is not a failure
    assert result.waits == [0, 0]
    assert result.jcts == [4300, 600]
    assert sim.finishes == 2 and result.jobs_finished == 2
    assert sim.runs[0].preempted == 1 and sim.runs[0].attempt == 1
    assert result.ettr == pytest.approx((16 * 3600 + 8 * 600) / (16 * 4300 + 8 * 600))
    assert result.to_json()["preemptions"] == 1
    # Preemption off (the spec's default): high waits for low to finish.
    calm = Simulation(bench_cluster(2), parse_trace(PRIORITY_TRACE.splitlines()), policy,
                      POLICIES[policy], faults,
                      queues=dataclasses.replace(queues, preemption=False), check=True).run()
    assert calm.preemptions == 0 and calm.waits == [0, 2600]


RECLAIM_TRACE = """id,submit_s,duration_s,pods,gpus_per_pod,queue
r1,0,3600,1,8,research
r2,100,3600,1,8,research
p1,600,600,1,8,prod
"""


def test_a_lender_reclaims_its_quota_from_a_borrower_of_the_same_priority() -> None:
    # 16 GPUs, two queues of 8 in one cohort, one priority. r2 borrows prod's idle 8.
    # p1 (prod, within its quota) finds no room: the borrowers are candidates whatever
    # their priority; r1 loses 0 s (checkpoint at 600), r2 200 s: r1 goes. r1 comes back
    # at 660 but would have to borrow again and the cohort has nothing idle: it resumes
    # when p1 ends at 1200, with 3000 s to go, and ends at 4200.
    queues = QueueConfig(
        (QueueSpec("research", nominal_quota=8, cohort="shared"),
         QueueSpec("prod", nominal_quota=8, cohort="shared")),
        preemption=True, source="test")
    faults = FaultModel(checkpoint_minutes=5, restart_seconds=60)
    jobs = parse_trace(RECLAIM_TRACE.splitlines())
    sim = Simulation(bench_cluster(2), jobs, "trainmaster", POLICIES["trainmaster"], faults,
                     queues=queues, check=True)
    result = sim.run()
    assert result.preemptions == 1 and result.lost_gpu_seconds == 0
    assert [r.preempted for r in sim.runs] == [1, 0, 0]
    assert result.waits == [0, 0, 0]
    assert result.jcts == [4200, 3600, 600]
    assert sim.finishes == 3


def test_a_queue_can_switch_preemption_off() -> None:
    queues = QueueConfig((QueueSpec("default", preemption=False),), preemption=True,
                         source="test")
    sim = Simulation(bench_cluster(2), parse_trace(PRIORITY_TRACE.splitlines()),
                     "trainmaster", POLICIES["trainmaster"], queues=queues, check=True)
    result = sim.run()
    assert result.preemptions == 0 and result.waits == [0, 2600]


def _with_queues(jobs: list[Job]) -> list[Job]:
    """Every third job in the lender queue at a higher priority, the rest borrowers."""
    return [dataclasses.replace(j, queue="prod" if i % 3 == 0 else "research",
                                priority=5 if i % 3 == 0 else None)
            for i, j in enumerate(jobs)]


SHARED = QueueConfig(
    (QueueSpec("research", nominal_quota=160, cohort="shared"),
     QueueSpec("prod", nominal_quota=160, cohort="shared")),
    priorities={"research": 1, "prod": 5}, preemption=True, source="test")


@pytest.mark.parametrize("policy", list(POLICIES))
def test_conservation_and_determinism_with_preemption(policy: str) -> None:
    cluster = bench_cluster(40)
    jobs = _with_queues(synthetic_jobs(150, seed=4, cluster_gpus=cluster.gpus, load=2.0))
    faults = FaultModel(node_mtbf_hours=80, checkpoint_minutes=10, restart_seconds=120,
                        seed=4)
    first = Simulation(cluster, jobs, policy, POLICIES[policy], faults, queues=SHARED,
                       check=True)
    result = first.run()
    again = Simulation(cluster, jobs, policy, POLICIES[policy], faults, queues=SHARED,
                       check=True).run()
    assert result.preemptions > 0
    assert first.finishes == len(jobs) and result.jobs_finished == len(jobs)
    assert all(r.remaining == 0 and r.finished >= 0 for r in first.runs)
    assert result.to_json() == again.to_json()
    assert result.waits == again.waits and result.jcts == again.jcts


def test_default_queue_adds_no_hook() -> None:
    cluster = bench_cluster(4)
    jobs = synthetic_jobs(20, seed=1, cluster_gpus=cluster.gpus)
    sim = Simulation(cluster, jobs, "trainmaster", POLICIES["trainmaster"])
    assert sim.sched.admission is None and sim.preemptor is None and sim.ledger is None


def test_priority_from_the_queue_unless_the_row_sets_one() -> None:
    queues = QueueConfig((QueueSpec("research"), QueueSpec("prod")),
                         priorities={"research": 1, "prod": 7}, source="test")
    jobs = parse_trace("id,submit_s,duration_s,pods,gpus_per_pod,queue,priority\n"
                       "a,0,10,1,8,prod,\nb,0,10,1,8,prod,3\nc,0,10,1,8,research,\n"
                       .splitlines())
    sim = Simulation(bench_cluster(2), jobs, "trainmaster", POLICIES["trainmaster"],
                     queues=queues)
    assert sim.priority_of == [7, 3, 1] and sim.queue_of == ["prod", "prod", "research"]


def test_an_undeclared_default_queue_is_refused() -> None:
    """With queues configured, a row without a queue is in `default`, which must be
    declared like any other: the simulator never invents a queue."""
    queues = QueueConfig((QueueSpec("research"),), source="test")
    jobs = parse_trace("id,submit_s,duration_s,pods,gpus_per_pod,queue\n"
                       "c,0,10,1,8,\n".splitlines())
    with pytest.raises(WorkloadError, match=r"'default' is not a queue of test"):
        Simulation(bench_cluster(2), jobs, "trainmaster", POLICIES["trainmaster"],
                   queues=queues)


def test_unknown_queue_names_the_row() -> None:
    jobs = parse_trace("id,submit_s,duration_s,pods,gpus_per_pod,queue\n"
                       "a,0,10,1,8,nope\n".splitlines())
    with pytest.raises(WorkloadError, match=r"job 'a' \(line 2\): queue: 'nope' is not a "
                       r"queue of test: add it there or use one of a, b"):
        Simulation(bench_cluster(2), jobs, "trainmaster", POLICIES["trainmaster"],
                   queues=COHORT)


@pytest.mark.parametrize(("queue", "gpus", "cap"), [("a", 24, 16), ("b", 32, 24)])
def test_a_job_its_queue_can_never_hold_is_refused(queue: str, gpus: int, cap: int) -> None:
    # a: 8 + borrowing limit 8; b: 16 + at most the cohort's other 8.
    jobs = [Job("big", 0, 10, gpus // 8, 8, queue, line=2)]
    with pytest.raises(WorkloadError, match=f"needs {gpus} GPUs, queue '{queue}' can never "
                       f"hold more than {cap}"):
        Simulation(bench_cluster(8), jobs, "trainmaster", POLICIES["trainmaster"],
                   queues=COHORT)
    Simulation(bench_cluster(8), [dataclasses.replace(jobs[0], pods=cap // 8)],
               "trainmaster", POLICIES["trainmaster"], queues=COHORT, check=True).run()


QUEUE_SIZES = st.sampled_from([(1, 1), (1, 8), (2, 8), (3, 4), (4, 8), (6, 8)])
MIXED = QueueConfig(
    (QueueSpec("research", nominal_quota=64, borrowing_limit=32, cohort="shared"),
     QueueSpec("prod", nominal_quota=64, cohort="shared"),
     QueueSpec("solo", nominal_quota=48)),
    priorities={"research": 1, "prod": 5, "solo": 3}, preemption=True, source="test")


@settings(max_examples=25, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(
    st.lists(st.tuples(st.integers(0, 500), st.integers(1, 400), QUEUE_SIZES,
                       st.sampled_from(["research", "prod", "solo"]),
                       st.sampled_from([None, 0, 9])), min_size=1, max_size=25),
    st.sampled_from(list(POLICIES)),
    st.booleans(),
)
def test_any_queued_workload_conserves(
    raw: list[tuple[int, int, tuple[int, int], str, int | None]], policy: str,
    faults_on: bool,
) -> None:
    # 20 nodes, 160 GPUs, fewer than the nominal quotas (64, 64, 48): both the quotas and
    # the cluster bind, lenders reclaim and priorities preempt.
    cluster = bench_cluster(20)
    jobs = sorted((Job(f"j{n}", at, dur, pods, gpus, queue, priority)
                   for n, (at, dur, (pods, gpus), queue, priority) in enumerate(raw)),
                  key=lambda j: j.submit_s)
    faults = FaultModel(node_mtbf_hours=5 if faults_on else None, repair_minutes=5,
                        checkpoint_minutes=1, restart_seconds=30, seed=len(raw))
    sim = Simulation(cluster, jobs, policy, POLICIES[policy], faults, queues=MIXED,
                     check=True)  # GPUs never over-allocated, ledger = running, caps held
    result = sim.run()
    assert result.jobs_finished == len(jobs) == sim.finishes
    assert all(r.remaining == 0 for r in sim.runs)
    assert result.preemptions == sum(r.preempted for r in sim.runs)
    assert all(w >= 0 for w in result.waits)
