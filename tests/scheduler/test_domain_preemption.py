"""Domain-freeing preemption (``domain_victims``) and its stability rules: the least lost
work across domains, elastic shrinks, the queue rules, nominations that time out and
preemptors shielded from ping-pong."""

from __future__ import annotations

import time
from collections.abc import Sequence

from trainmaster.scheduler import ClusterState
from trainmaster.scheduler.placement.domain_victims import choose_domain
from trainmaster.scheduler.placement.stability import PreemptionGuard
from trainmaster.scheduler.placement.victims import nominate_victims, select_victims
from trainmaster.scheduler.plugins import DEFAULT_FILTERS, DEFAULT_SCORER
from trainmaster.scheduler.plugins.preemption import Victim, elastic_parts, priced
from trainmaster.scheduler.runtime.convert import pod_group_info
from trainmaster.scheduler.runtime.gang_scheduler import GangScheduler

from .builders import LEVELS, fabric_nodes, make_gang, make_pod


def _running(snap: ClusterState, name: str, nodes: list[str], *, gpus: int = 8,
             priority: int = 0, work: float = 0.0) -> Victim:
    pods = []
    for i, node in enumerate(nodes):
        pod = make_pod(f"{name}-{i}", gpus=gpus, gang=name, priority=priority)
        snap.add_bound(pod, node)
        pods.append((pod, node))
    return Victim(f"default/{name}", priority, tuple(pods), work)


def _leaf(n: int, nodes: Sequence[int]) -> list[str]:
    return [f"s0-l{n}-n{i}" for i in nodes]


def test_the_domain_with_the_least_lost_work_is_freed_not_the_lowest_priority() -> None:
    # 3 leaves x 4 nodes, full. A 3-node required gang: leaf-0 has one 4-node gang of
    # priority 0 with 4 h of work (expensive); leaf-1 three 1-node gangs of priority 1
    # with little work; leaf-2 one 2-node and two 1-node gangs, the cheapest 3 nodes.
    snap = ClusterState(fabric_nodes(1, 3, 4), LEVELS)
    big = _running(snap, "big", _leaf(0, range(4)), priority=0, work=4 * 3600 * 32)
    l1 = [_running(snap, f"a{i}", _leaf(1, [i]), priority=1, work=100.0 + i)
          for i in range(4)]
    pair = _running(snap, "pair", _leaf(2, [0, 1]), priority=1, work=50.0)
    c2 = _running(snap, "c2", _leaf(2, [2]), priority=1, work=40.0)
    c3 = _running(snap, "c3", _leaf(2, [3]), priority=1, work=400.0)
    gang = make_gang("new", 3, gpus=8, level="leaf", mode="required", priority=5)
    found = select_victims(snap, gang, [big, *l1, pair, c2, c3], filters=DEFAULT_FILTERS,
                           scorer=DEFAULT_SCORER)
    assert found is not None
    # leaf-2: pair + c2 (90) beats leaf-1's cheapest three (303) and big (460,800)
    assert found.domain == "spine-0/leaf-2"
    assert {v.gang for v in found.victims} == {"default/pair", "default/c2"}
    assert found.work_lost == 90.0
    assert found.nodes == set(_leaf(2, [0, 1, 2]))
    # the greedy order of before (lowest priority first) takes big instead
    greedy = select_victims(snap, gang, [big, *l1, pair, c2, c3], filters=DEFAULT_FILTERS,
                            scorer=DEFAULT_SCORER, domain_search=False)
    assert greedy is not None and [v.gang for v in greedy.victims] == ["default/big"]


def test_an_elastic_gang_is_shrunk_when_that_is_the_cheapest_way() -> None:
    # leaf-0: an elastic 4-node gang (min 2) with much work since its checkpoint;
    # leaf-1: two 2-node gangs, 1,000 GPU-s each. A 2-node gang: shrinking the elastic
    # one (rescale: 32 GPUs x 30 s = 960) is cheapest; stopping it would cost far more.
    snap = ClusterState(fabric_nodes(1, 2, 4), LEVELS)
    elastic = _running(snap, "el", _leaf(0, range(4)), work=1e6)
    others = [_running(snap, f"o{i}", _leaf(1, [2 * i, 2 * i + 1]), work=1000.0)
              for i in range(2)]
    gang = make_gang("new", 2, gpus=8, level="leaf", mode="required", priority=5)
    found = select_victims(snap, gang, [*elastic_parts(elastic, 2), *others],
                           filters=DEFAULT_FILTERS, scorer=DEFAULT_SCORER)
    assert found is not None
    [victim] = found.victims
    assert victim.shrink and victim.gang == "default/el" and victim.work_lost == 960.0
    assert {pod.name for pod, _ in victim.pods} == {"el-2", "el-3"}  # highest ranks
    # with a 4-node gang the elastic one must stop: both its parts, priced together
    gang4 = make_gang("new4", 4, gpus=8, level="leaf", mode="required", priority=5)
    found = select_victims(snap, gang4, [*elastic_parts(elastic, 2), *others],
                           filters=DEFAULT_FILTERS, scorer=DEFAULT_SCORER)
    assert found is not None and found.domain == "spine-0/leaf-1"
    assert found.work_lost == 2000.0


def test_quota_and_nominated_nodes_are_respected() -> None:
    snap = ClusterState(fabric_nodes(1, 2, 2), LEVELS)
    cheap = _running(snap, "cheap", _leaf(0, [0, 1]), work=10.0)
    dear = _running(snap, "dear", _leaf(1, [0, 1]), work=20.0)
    gang = make_gang("new", 2, gpus=8, level="leaf", mode="required", priority=5)
    # quota is freed only by evicting dear (say, the borrower): dear it is
    found = select_victims(snap, gang, [cheap, dear], filters=DEFAULT_FILTERS,
                           scorer=DEFAULT_SCORER,
                           admits=lambda vs: any(v.gang == "default/dear" for v in vs))
    assert found is not None and [v.gang for v in found.victims] == ["default/dear"]
    # leaf-0's nodes are nominated to another preemptor: only leaf-1 may be freed
    nominated = {"default/other": frozenset(_leaf(0, [0, 1]))}
    found = nominate_victims(snap, gang, [cheap, dear], nominated,
                             filters=DEFAULT_FILTERS, scorer=DEFAULT_SCORER)
    assert found is not None and found.domain == "spine-0/leaf-1"
    assert nominated[gang.key] == frozenset(_leaf(1, [0, 1]))


def test_a_victim_that_does_not_help_is_never_in_the_set() -> None:
    # zero-cost victims are as cheap as none: the set is still minimal
    snap = ClusterState(fabric_nodes(1, 1, 4), LEVELS)
    free0 = _running(snap, "z0", _leaf(0, [0]), work=0.0)
    free1 = _running(snap, "z1", _leaf(0, [1]), work=0.0)
    _running(snap, "keep2", _leaf(0, [2]), priority=9)
    _running(snap, "keep3", _leaf(0, [3]), priority=9)
    gang = make_gang("new", 1, gpus=8, level="leaf", mode="required", priority=5)
    choice = choose_domain(snap, gang, [free0, free1], filters=DEFAULT_FILTERS)
    assert choice is not None and len(choice.victims) == 1 and choice.exact


def test_the_restart_cost_is_priced_and_read_from_the_podgroup() -> None:
    victim = Victim("v", 0, tuple((make_pod(f"p{i}", gpus=8), "n") for i in range(2)))
    found = priced(victim, 5, now=1000.0, since=900.0, restart_seconds=60.0)
    assert found is not None and found.work_lost == 16 * 100 + 16 * 60
    group = pod_group_info({"metadata": {"name": "g", "annotations": {
        "trainmaster.io/restart-seconds": "120"}}, "spec": {"minMember": 2}})
    assert group.restart_seconds == 120.0
    for bad in ("soon", "-5", "inf", "nan"):
        group = pod_group_info({"metadata": {"name": "g", "annotations": {
            "trainmaster.io/restart-seconds": bad}}})
        assert group.restart_seconds == 0.0


def test_freed_nodes_stay_the_preemptors_until_it_binds_or_the_timeout_passes() -> None:
    now = [0.0]
    snap = ClusterState(fabric_nodes(1, 2, 2), LEVELS)
    sched = GangScheduler(snap, clock=lambda: now[0], nomination_timeout=100.0)
    # the victims are gone; leaf-0 is nominated to a preemptor still waiting (say, for
    # a member pod to be created)
    _running(snap, "rest", _leaf(1, [0, 1]), priority=9)
    preemptor = make_gang("big", 2, gpus=8, level="leaf", mode="required", priority=5)
    sched.nominated[preemptor.key] = frozenset(_leaf(0, [0, 1]))
    sched.preempted(preemptor)
    small = make_gang("small", 1, gpus=8, level="leaf", mode="required", priority=7)
    sched.submit(small)
    result = sched.run_cycle()
    assert not result.placed  # a smaller gang, even of higher priority, may not refill it
    now[0] = 50.0
    assert not sched.run_cycle().placed
    now[0] = 101.0  # the timeout passed: the hole is anyone's again
    result = sched.run_cycle()
    assert [p.gang for p in result.placed] == [small.key]
    assert preemptor.key not in sched.nominated
    assert preemptor.key in sched.expired_nominations


def test_a_preemptor_is_not_evicted_by_a_gang_of_its_priority_within_the_window() -> None:
    guard = PreemptionGuard(window=600.0)
    placed = Victim("default/a", 5, (), 10.0, borrowed=True)  # reclaimable by quota rules
    other = Victim("default/b", 1, (), 99.0)
    guard.preempted("default/a", 5, now=0.0)
    assert guard.allowed([placed, other], 5, now=10.0) == [other]  # same priority: no
    assert guard.allowed([placed, other], 3, now=10.0) == [other]  # lower: no
    assert guard.allowed([placed, other], 6, now=10.0) == [placed, other]  # higher: yes
    assert guard.allowed([placed, other], 5, now=600.0) == [placed, other]  # window over


def test_ping_pong_between_two_domains_does_not_happen() -> None:
    # Two leaves; a (priority 5) freed leaf-0 by preemption. b (priority 5, required
    # leaf, cheaper to place by evicting a than the gang in leaf-1) may evict a only
    # through the queue rules (a borrower): the guard takes a out of its candidates,
    # so b frees leaf-1 instead, and a keeps the leaf it preempted for.
    now = [0.0]
    snap = ClusterState(fabric_nodes(1, 2, 2), LEVELS)
    sched = GangScheduler(snap, clock=lambda: now[0])
    a_gang = make_gang("a", 2, gpus=8, level="leaf", mode="required", priority=5)
    sched.preempted(a_gang)
    a = Victim("default/a", 5, tuple(_running(snap, "a", _leaf(0, [0, 1]), priority=5)
                                     .pods), 1.0, borrowed=True)
    dear = _running(snap, "dear", _leaf(1, [0, 1]), priority=1, work=5000.0)
    b = make_gang("b", 2, gpus=8, level="leaf", mode="required", priority=5)
    candidates = sched.guard.allowed([a, dear], b.priority, sched.now())
    found = nominate_victims(snap, b, candidates, sched.nominated,
                             filters=DEFAULT_FILTERS, scorer=DEFAULT_SCORER)
    assert found is not None and [v.gang for v in found.victims] == ["default/dear"]
    now[0] = 601.0  # after the window, the cheaper victim is fair game again
    candidates = sched.guard.allowed([a, dear], b.priority, sched.now())
    found = select_victims(snap, b, candidates, filters=DEFAULT_FILTERS,
                           scorer=DEFAULT_SCORER)
    assert found is not None and [v.gang for v in found.victims] == ["default/a"]


def test_the_runtime_frees_the_cheapest_leaf_and_says_so() -> None:
    """The runtime's preemptor (on the in-memory API; the live test
    ``test_queues_live.py::test_high_priority_gang_preempts_whole_lower_priority_gangs_and_binds``
    checks the same Events on the real control plane): leaf-0 holds a gang of the lowest
    priority that checkpointed an hour ago, leaf-1 two gangs of a higher priority that
    checkpointed a minute ago. A required-leaf gang of priority 100 frees leaf-1, evicts
    only its two gangs, and the Events and its pods' PodScheduled say where and what it
    costs."""
    import asyncio
    from datetime import datetime

    from tests.scheduler.apifake import Cluster, fake_runtime, group_obj, node_obj, pod_obj
    from trainmaster.api import UTC, format_seconds
    from trainmaster.scheduler import SchedulerConfig

    now = time.time()

    def group(name: str, size: int, checkpoint: float | None) -> dict[str, object]:
        obj = group_obj(name, size, domain="leaf", mode="required")
        if checkpoint is not None:
            obj["metadata"]["annotations"]["trainmaster.io/last-checkpoint-time"] = (
                format_seconds(datetime.fromtimestamp(checkpoint, UTC)))
        return obj

    def running(name: str, node: str, priority: int) -> dict[str, object]:
        return pod_obj(name, group=name.rsplit("-", 1)[0], gpus=8, node=node,
                       phase="Running", extra_spec={"priority": priority})

    nodes = [node_obj(f"n{leaf}{i}", leaf=f"leaf-{leaf}") for leaf in (0, 1) for i in (0, 1)]
    pods = [running("old-0", "n00", 0), running("old-1", "n01", 0),
            running("a-0", "n10", 5), running("b-0", "n11", 5),
            *(pod_obj(f"big-{i}", group="big", gpus=8, extra_spec={"priority": 100})
              for i in range(2))]
    groups = [group("old", 2, now - 3600), group("a", 1, now - 60), group("b", 1, now - 60),
              group("big", 2, None)]
    cluster = Cluster(nodes, pods, groups)
    api, rt = fake_runtime(cluster, SchedulerConfig(report_interval=0.0))

    async def run() -> None:
        await rt.start()
        await rt.step()
        await rt.writer.drain(1)
        await rt.shutdown()

    asyncio.run(run())
    deleted = sorted(p.rsplit("/", 1)[1] for m, p, _ in api.calls if m == "DELETE")
    assert deleted == ["a-0", "b-0"]  # leaf-1's two gangs, nothing of leaf-0
    events = [b for _, b in api.posts("/events")]
    preempted = {e["involvedObject"]["name"]: e["message"] for e in events
                 if e["reason"] == "Preempted"}
    assert set(preempted) == {"a", "b"}
    assert all("to free leaf spine-0/leaf-1" in m for m in preempted.values())
    [preempting] = [e for e in events if e["reason"] == "Preempting"]
    assert preempting["involvedObject"]["name"] == "big"
    assert preempting["message"].startswith("preempting 2 gangs (ns/")
    assert "to free leaf spine-0/leaf-1: " in preempting["message"]
    lost = float(preempting["message"].split(": ")[1].split(" GPU-seconds")[0])
    assert 2 * 8 * 60 <= lost <= 2 * 8 * 120  # a minute (and the test's time) each
    why = [b["status"]["conditions"][0]["message"] for m, p, b in api.calls
           if m == "PATCH" and p.endswith("/big-0/status") and "conditions" in b["status"]
           and b["status"]["conditions"][0]["type"] == "PodScheduled"]
    assert why and why[-1].startswith("preempting 2 gangs (")
    # "why pending" names the domain freed and the work lost, as the Event does
    assert f"to free leaf spine-0/leaf-1: {lost:.0f} GPU-seconds of work lost" in why[-1]
