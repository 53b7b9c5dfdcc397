"""The cycle's wake-up index (``runtime/retry.py``): who is retried, and that the
decisions are those of the cycle that tries every queued gang."""

from __future__ import annotations

import random
from collections.abc import Callable

import pytest

from trainmaster.scheduler import (
    GPU,
    ClusterState,
    Gang,
    GangScheduler,
    NodeInfo,
    Placement,
    PodRequest,
    QueueLedger,
    QueueSpec,
    RetryPolicy,
    TopologyConstraint,
    TopologyMode,
)
from trainmaster.scheduler.runtime.metrics import SchedulerMetrics

LEVELS = ("spine", "leaf")


def _cluster(spines: int = 2, leaves: int = 2, per_leaf: int = 4) -> ClusterState:
    nodes = [NodeInfo(f"n{s}{leaf}{k}", {GPU: 8, "pods": 110},
                      topology=(f"s{s}", f"s{s}-l{leaf}"))
             for s in range(spines) for leaf in range(leaves) for k in range(per_leaf)]
    return ClusterState(nodes, levels=LEVELS)


def _gang(name: str, pods: int, gpus: int, *, created: float = 0.0, priority: int = 0,
          level: str = "leaf", mode: TopologyMode = TopologyMode.PREFERRED) -> Gang:
    members = tuple(PodRequest(f"{name}-{k}", requests={GPU: gpus}, gang=name,
                               creation_timestamp=created, priority=priority)
                    for k in range(pods))
    return Gang(name, members, topology=TopologyConstraint(level, mode),
                creation_timestamp=created, priority=priority)


class Clock:
    def __init__(self) -> None:
        self.now = 0.0

    def __call__(self) -> float:
        return self.now


def _replay(seed: int, policy: RetryPolicy, steps: int = 160
            ) -> tuple[list[tuple[float, str, tuple[tuple[str, str], ...]]], GangScheduler]:
    """A random workload with deep queues: gangs of every shape arrive faster than they
    finish, jobs end, time passes beyond the starvation timeout. Returns every placement
    (time, gang, bindings) in order."""
    rng = random.Random(seed)
    clock = Clock()
    state = _cluster()
    sched = GangScheduler(state, clock=clock, starvation_after=30.0, retry=policy)
    running: dict[str, tuple[float, Placement]] = {}
    log: list[tuple[float, str, tuple[tuple[str, str], ...]]] = []
    made = 0
    for _ in range(steps):
        clock.now += rng.choice((0.5, 1.0, 3.0, 10.0, 40.0))
        for key, (ends, placement) in sorted(running.items()):
            if ends <= clock.now:
                for binding in placement.bindings:
                    state.remove(binding.pod.uid)
                del running[key]
        for _ in range(rng.choice((0, 1, 1, 2, 3))):
            made += 1
            pods = rng.choice((1, 1, 2, 3, 4, 6, 8))
            gpus = rng.choice((1, 2, 4, 8))
            mode = rng.choice((TopologyMode.REQUIRED, TopologyMode.PREFERRED))
            level = rng.choice(("leaf", "spine", "node")) if pods * gpus <= 8 else \
                rng.choice(("leaf", "spine"))
            if level == "leaf" and pods * gpus > 32:
                level = "spine"
            sched.submit(_gang(f"g{made}", pods, gpus, created=clock.now,
                               priority=rng.choice((0, 0, 0, 1)), level=level, mode=mode))
        result = sched.run_cycle()
        for placement in result.placed:
            for binding in placement.bindings:
                state.confirm(binding.pod.uid)
            running[placement.gang] = (clock.now + rng.choice((5.0, 20.0, 60.0, 200.0)),
                                       placement)
            log.append((clock.now, placement.gang,
                        tuple((b.pod.name, b.node) for b in placement.bindings)))
    return log, sched


_EVENTS_ONLY = RetryPolicy(backoff_initial=1e9, backoff_max=1e9, full_pass_every=1e9)
"""Safety nets far away: the event wake-ups alone must find every gang that fits."""


@pytest.mark.parametrize("seed", range(8))
def test_the_index_places_the_same_gangs_on_the_same_nodes_at_the_same_times(seed: int) -> None:
    indexed, sched = _replay(seed, _EVENTS_ONLY)
    every, _ = _replay(seed, RetryPolicy(index=False))
    assert indexed == every
    assert len(every) > 20
    stats = sched.wake.stats
    assert stats.skipped > 0, "a deep queue where every gang was tried every cycle"
    assert stats.wakeups["capacity"] > 0 and stats.wakeups["starving"] > 0


def test_with_default_backoff_and_full_passes_the_decisions_stay_the_same() -> None:
    indexed, sched = _replay(3, RetryPolicy())
    every, _ = _replay(3, RetryPolicy(index=False))
    assert indexed == every
    assert sched.wake.stats.wakeups["backoff"] > 0
    assert sched.wake.stats.full_passes > 0


def _full(state: ClusterState, name: str, nodes: list[str]) -> list[PodRequest]:
    pods = []
    for node in nodes:
        pod = PodRequest(f"{name}-{node}", requests={GPU: 8})
        state.add_bound(pod, node)
        pods.append(pod)
    return pods


def test_a_pod_finishing_wakes_only_the_gangs_it_can_help() -> None:
    clock = Clock()
    state = _cluster()
    holders = _full(state, "run", [n.name for n in state.nodes])
    sched = GangScheduler(state, clock=clock, starvation_after=1e9, retry=_EVENTS_ONLY)
    # Waiting: one-pod gangs of 8 and 4 GPUs, and a gang needing a whole leaf.
    sched.submit(_gang("big", 4, 8, level="leaf", mode=TopologyMode.REQUIRED))
    for k in range(20):
        sched.submit(_gang(f"small{k}", 1, 4, created=1.0 + k))
    assert not sched.run_cycle().placed
    tried = sched.wake.stats.tried
    clock.now = 0.5
    assert not sched.run_cycle().placed and sched.wake.stats.tried == tried  # no event
    # A 2-GPU pod leaves a node that stays 6 GPUs short: a 4-GPU pod does not fit there.
    state.remove(holders[0].uid)
    state.add_bound(PodRequest("rest", requests={GPU: 6}), state.nodes[0].name)
    clock.now = 1.0
    assert not sched.run_cycle().placed
    assert sched.wake.stats.tried == tried, "a release nobody fits woke somebody"
    # 8 GPUs free on one node: two small gangs fit; the leaf-sized gang is not tried.
    state.remove(holders[1].uid)
    clock.now = 2.0
    result = sched.run_cycle()
    assert [p.gang for p in result.placed] == ["default/small0", "default/small1"]
    # the other 18 found the node full at their turn: not tried
    assert sched.wake.stats.tried == tried + 2
    assert sched.wake.stats.rechecked == 18
    assert sched.wake.stats.wakeups["capacity"] >= 1
    assert "default/big" not in {f.gang for f in result.unschedulable}


def test_backoff_doubles_up_to_its_cap_and_a_full_pass_comes_at_its_interval() -> None:
    clock = Clock()
    state = _cluster(1, 1, 1)
    _full(state, "run", ["n000"])
    policy = RetryPolicy(backoff_initial=1.0, backoff_max=4.0, full_pass_every=100.0)
    sched = GangScheduler(state, clock=clock, retry=policy)
    sched.submit(_gang("g", 1, 8))
    tries = []
    for t in range(0, 130):
        clock.now = float(t)
        before = sched.wake.stats.tried
        sched.run_cycle()
        if sched.wake.stats.tried > before:
            tries.append(t)
    # tried at 0 (new), then after 1, 2, 4, 4, ... seconds (capped)
    assert tries[:6] == [0, 1, 3, 7, 11, 15]
    assert sched.next_wake() is not None
    assert sched.wake.stats.full_passes == 1  # at t=100
    assert sched.wake.stats.wakeups["backoff"] >= 25


class _LedgerAdmission:
    """The core's admission over the real ledger (as the simulator's and the runtime's)."""

    def __init__(self, ledger: QueueLedger, queue_of: Callable[[str], str]) -> None:
        self.ledger, self.queue_of = ledger, queue_of

    def refusal(self, gang: Gang) -> str | None:
        return self.ledger.refusal(self.queue_of(gang.key), sum(
            p.requests.get(GPU, 0) for p in gang.members))

    def admitted(self, gang: Gang, placement: Placement) -> None:
        for b in placement.bindings:
            self.ledger.charge(b.pod.uid, self.queue_of(gang.key), b.pod.requests)

    def retry_scope(self, gang: Gang) -> str | None:
        return self.ledger.retry_scope(self.queue_of(gang.key))

    def releases(self, scope: str) -> int:
        return self.ledger.releases(scope)


def test_a_quota_hold_wakes_on_a_release_in_its_own_queue_only() -> None:
    clock = Clock()
    state = _cluster()
    ledger = QueueLedger([QueueSpec("a", 8), QueueSpec("b", 8)])
    queue = {"default/a1": "a", "default/a2": "a", "default/b1": "b", "default/b2": "b"}
    sched = GangScheduler(state, clock=clock, admission=_LedgerAdmission(ledger, queue.get),
                          retry=_EVENTS_ONLY)
    for name in ("a1", "a2", "b1", "b2"):
        sched.submit(_gang(name, 1, 8))
    placed = {p.gang: p for p in sched.run_cycle().placed}
    assert set(placed) == {"default/a1", "default/b1"}
    for placement in placed.values():
        for b in placement.bindings:
            state.confirm(b.pod.uid)
    tried = sched.wake.stats.tried
    clock.now = 1.0
    sched.run_cycle()
    assert sched.wake.stats.tried == tried
    uid = placed["default/b1"].bindings[0].pod.uid
    state.remove(uid)
    ledger.release(uid)
    clock.now = 2.0
    result = sched.run_cycle()
    assert [p.gang for p in result.placed] == ["default/b2"]
    assert sched.wake.stats.tried == tried + 1, "queue a's gang was tried for b's release"
    assert sched.wake.stats.wakeups["quota"] == 1


def test_the_metrics_count_wakeups_by_reason_full_passes_and_backoffs() -> None:
    _, sched = _replay(1, RetryPolicy())
    metrics = SchedulerMetrics()
    metrics.observe_retries(sched.wake.stats)
    metrics.observe_retries(sched.wake.stats)  # adds only what is new
    stats = sched.wake.stats

    def value(name: str, **labels: str) -> float:
        found = metrics.registry.get_sample_value(name, labels)
        assert found is not None, name
        return found

    for reason in ("new", "capacity", "backoff", "starving"):
        assert value("trainmaster_scheduler_retry_wakeups_total", reason=reason) \
            == stats.wakeups[reason] > 0
    assert value("trainmaster_scheduler_retry_full_passes_total") == stats.full_passes
    assert value("trainmaster_scheduler_retry_backoffs_total") == stats.backoffs > 0


def test_a_release_that_leaves_enough_gpus_but_no_node_for_a_pod_tries_nobody() -> None:
    """A leaf with the GPUs of a gang in total but in pieces too small for its pods:
    the gang woken by it is not tried (``still_helps`` counts its pod slots)."""
    clock = Clock()
    state = _cluster()
    holders = _full(state, "run", [n.name for n in state.nodes])
    sched = GangScheduler(state, clock=clock, starvation_after=1e9, retry=_EVENTS_ONLY)
    sched.submit(_gang("pair", 2, 8, level="leaf", mode=TopologyMode.REQUIRED))
    assert not sched.run_cycle().placed
    tried, rechecked = sched.wake.stats.tried, sched.wake.stats.rechecked
    # Leaf s0-l0: one node wholly free and two with 4 GPUs free: 16 free in the leaf
    # (its need) and a node for one pod, but no second 8-GPU slot.
    state.remove(holders[0].uid)
    for k in (1, 2):
        state.remove(holders[k].uid)
        state.add_bound(PodRequest(f"half{k}", requests={GPU: 4}), state.nodes[k].name)
    clock.now = 1.0
    assert not sched.run_cycle().placed
    assert sched.wake.stats.wakeups["capacity"] == 1
    assert sched.wake.stats.tried == tried and sched.wake.stats.rechecked == rechecked + 1
    # A second whole node of that leaf free: tried and placed there.
    state.remove(holders[3].uid)
    clock.now = 2.0
    result = sched.run_cycle()
    assert [p.gang for p in result.placed] == ["default/pair"]
    assert {b.node for b in result.placed[0].bindings} == {state.nodes[0].name,
                                                          state.nodes[3].name}
