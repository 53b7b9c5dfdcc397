"""Elastic jobs in the simulation, by hand: admitted at partial size, grown when capacity
frees, shrunk on a node loss and as a preemption, each size change a rescale."""

from __future__ import annotations

import pytest

from trainmaster.scheduler import QueueSpec
from trainmaster.simulate import (
    POLICIES,
    ElasticModel,
    FaultModel,
    QueueConfig,
    Simulation,
    TraceError,
    bench_cluster,
    parse_trace,
)
from trainmaster.simulate._faults import FailureClock

HEAD = "id,submit_s,duration_s,pods,gpus_per_pod,queue,priority,topology,min_pods\n"
MODEL = ElasticModel(exponent=1.0, rescale_seconds=30.0)


def _run(trace: str, elastic: ElasticModel | None, nodes: int = 2,
         faults: FaultModel = FaultModel(), queues: QueueConfig = QueueConfig(),
         policy: str = "trainmaster") -> Simulation:
    sim = Simulation(bench_cluster(nodes), parse_trace((HEAD + trace).splitlines()), policy,
                     POLICIES[policy], faults, queues=queues, check=True, elastic=elastic)
    sim.run()
    return sim


@pytest.mark.parametrize("policy", list(POLICIES))
def test_admitted_at_partial_size_then_grown(policy: str) -> None:
    # 2 nodes. a holds one until 100. e (2 pods, min 1, 200 s of work at 2 pods) arrives
    # at 10: it starts on the free node at half speed, 90 s x 0.5 = 45 s of work by 100,
    # grows to 2 pods then (a rescale: 30 s without progress) and ends at 130 + 155.
    trace = "a,0,100,1,8,,,,\ne,10,200,2,8,,,,1\n"
    sim = _run(trace, MODEL, policy=policy)
    runs = sim.runs
    assert runs[1].first_start == 10 and runs[1].finished == 285
    assert sim.rescales == 1
    rigid = _run(trace, None, policy=policy)
    assert rigid.runs[1].first_start == 100 and rigid.runs[1].finished == 300
    assert rigid.rescales == 0


def test_never_below_the_minimum() -> None:
    # min 2 of 2 free... one node busy: e (min 2) waits like a rigid gang.
    sim = _run("a,0,100,1,8,,,,\ne,10,200,3,8,,,,2\n", MODEL, nodes=3)
    # 2 nodes free at 10: admitted at 2 (its minimum), grown to 3 at 100.
    assert sim.runs[1].first_start == 10 and sim.rescales == 1
    late = _run("a,0,100,2,8,,,,\ne,10,200,3,8,,,,2\n", MODEL, nodes=3)
    assert late.runs[1].first_start == 100  # 1 node free: below its minimum, it waits


def test_shrinks_on_node_loss_and_grows_back_on_repair() -> None:
    faults = FaultModel(node_mtbf_hours=10, repair_minutes=10, checkpoint_minutes=5,
                        restart_seconds=60, seed=2)
    clock = FailureClock(faults, 2)
    first, then = clock.next(), clock.next()
    assert first is not None and then is not None
    lost_at, second = first[0], then[0]
    work = 10_000.0
    assert lost_at < work < second  # one failure while e runs (seed 2)
    sim = _run(f"e,0,{work:g},2,8,,,,1\n", MODEL, faults=faults)
    back = lost_at + 600
    # full speed to the loss, half speed from the rescale to the repair, full after it
    left = work - lost_at - 0.5 * (back - lost_at - 30)
    assert sim.runs[0].finished == pytest.approx(back + 30 + left)
    assert sim.failures == 1 and sim.restarts == 0 and sim.rescales == 2
    assert sim.lost_gpu_seconds == 0
    rigid = _run(f"e,0,{work:g},2,8,,,,1\n", None, faults=faults)
    assert rigid.restarts == 1
    assert sim.runs[0].finished < rigid.runs[0].finished


def test_preemption_shrinks_an_elastic_job_instead_of_stopping_it() -> None:
    # e (priority 0, 2 pods, min 1) runs from 0; high (priority 10, 1 pod) arrives at
    # 1000. Taking e's member above its minimum costs a rescale, stopping it the work
    # since its checkpoint: e shrinks, runs at half speed from 1030, grows back when
    # high ends at 1600 and resumes full speed at 1630: 2600 - 285 s of work left.
    queues = QueueConfig((QueueSpec("default"),), preemption=True, source="test")
    faults = FaultModel(checkpoint_minutes=5, restart_seconds=60)
    trace = "e,0,3600,2,8,,0,,1\nhigh,1000,600,1,8,,10,,\n"
    sim = _run(trace, MODEL, faults=faults, queues=queues)
    assert sim.preemptions == 1 and sim.restarts == 0 and sim.lost_gpu_seconds == 0
    assert sim.runs[1].first_start == 1000 and sim.runs[1].finished == 1600
    assert sim.runs[0].finished == 1630 + 2600 - 285 and sim.rescales == 2
    rigid = _run(trace, None, faults=faults, queues=queues)
    assert rigid.runs[0].finished == 4300  # evicted whole, as without elasticity


def test_sub_linear_scaling_and_the_model_bounds() -> None:
    model = ElasticModel(exponent=0.5, rescale_seconds=0)
    assert model.speed(1, 4) == 0.5 and model.speed(4, 4) == 1.0
    with pytest.raises(ValueError, match="--scaling-exponent"):
        ElasticModel(exponent=1.5)
    with pytest.raises(ValueError, match="--rescale-seconds"):
        ElasticModel(rescale_seconds=-1)


def test_min_pods_column_is_checked() -> None:
    with pytest.raises(TraceError, match=r"t\.csv:2: column 'min_pods': min_pods must be <= pods"):
        parse_trace((HEAD + "e,0,10,2,8,,,,3\n").splitlines(), "t.csv")
    (job,) = parse_trace((HEAD + "e,0,10,2,8,,,,1\n").splitlines())
    assert job.elastic and job.min_pods == 1
