"""`trainmaster bench queue`: the scheduler's cycle with a deep queue, in process.

The runtime's own ``GangScheduler`` and ``Cycle`` (no API server: the bind port starts a
gang at once) on a cluster of the bench topology. Two phases, each run twice on the same
draw, once with the wake-up index (``RetryPolicy()``) and once trying every queued gang
at every cycle (``RetryPolicy(index=False)``, the cycle before the index):

* **empty queue**: gangs arrive one at a time on an empty cluster until it is full; each
  arrival is one event and one cycle.
* **deep queue**: the cluster full, ``gangs`` more gangs waiting (mixed sizes 1-32 pods of
  4 or 8 GPUs, required at node, leaf or spine or preferred; together about twice the
  cluster), then ``events`` events, each a running gang finishing (its pods removed) and
  a new gang arriving, so the queue stays deep. Each event is one cycle.

Per event: the process CPU time of the cycle (``time.process_time``), reported as p50,
p95 and max; and pods placed per CPU second of the cycles (what bounds binds per second
when the API server is not the limit). Both runs must place the same gangs on the same
nodes at the same events (``same_decisions``).
"""

from __future__ import annotations

import os
import random
import time
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from trainmaster.scheduler import (
    GPU,
    ClusterState,
    Cycle,
    Gang,
    GangScheduler,
    NodeInfo,
    Placement,
    PodRequest,
    RetryPolicy,
    TopologyConstraint,
    TopologyMode,
)

NODES_PER_LEAF, LEAVES_PER_SPINE = 20, 5
Report = Callable[[str], None]


def _silent(_: str) -> None:
    pass


def _nodes(count: int) -> list[NodeInfo]:
    width = len(str(count - 1))
    return [NodeInfo(f"node-{i:0{width}d}", {GPU: 8, "pods": 110},
                     topology=(f"spine-{i // (NODES_PER_LEAF * LEAVES_PER_SPINE)}",
                               f"leaf-{i // NODES_PER_LEAF}"))
            for i in range(count)]


def _gang(rng: random.Random, name: str, created: float) -> Gang:
    pods = rng.choice((1, 1, 1, 2, 2, 4, 4, 8, 16, 32))
    gpus = rng.choice((4, 8))
    total = pods * gpus
    if pods == 1:
        topology = TopologyConstraint("node", TopologyMode.REQUIRED)
    elif total <= NODES_PER_LEAF * 8 and rng.random() < 0.5:
        topology = TopologyConstraint("leaf", TopologyMode.REQUIRED)
    elif rng.random() < 0.5:
        topology = TopologyConstraint("spine", TopologyMode.REQUIRED)
    else:
        topology = TopologyConstraint("leaf", TopologyMode.PREFERRED)
    members = tuple(PodRequest(f"{name}-{k}", namespace="bench", requests={GPU: gpus},
                               gang=name, creation_timestamp=created) for k in range(pods))
    return Gang(name, members, namespace="bench", topology=topology,
                creation_timestamp=created)


@dataclass(frozen=True, slots=True)
class QueueRun:
    index: bool
    empty_events: int
    empty_cpu_ms_p50: float
    empty_cpu_ms_p95: float
    empty_pods_per_cpu_second: float
    deep_events: int
    deep_queued_min: int
    deep_cpu_ms_p50: float
    deep_cpu_ms_p95: float
    deep_cpu_ms_max: float
    deep_pods_per_cpu_second: float
    first_cycle_ms: float
    """The cycle that first sees every waiting gang (all new: all tried)."""
    tried_per_event: float
    retries: dict[str, Any]

    def to_json(self) -> dict[str, Any]:
        return {k: getattr(self, k) for k in self.__slots__}


@dataclass(frozen=True, slots=True)
class QueueResult:
    nodes: int
    gangs: int
    events: int
    seed: int
    runs: tuple[QueueRun, ...]
    same_decisions: bool
    load_average: tuple[float, float, float]

    def to_json(self) -> dict[str, Any]:
        return {"nodes": self.nodes, "gangs": self.gangs, "events": self.events,
                "seed": self.seed, "same_decisions": self.same_decisions,
                "load_average": list(self.load_average),
                "runs": [r.to_json() for r in self.runs]}


def _pct(values: list[float], p: float) -> float:
    ordered = sorted(values)
    if not ordered:
        return 0.0
    return ordered[min(len(ordered) - 1, round(p / 100 * (len(ordered) - 1)))]


class _World:
    """One run: the state, the scheduler and its cycle, the running gangs."""

    def __init__(self, nodes: int, index: bool, seed: int) -> None:
        self.clock = 0.0
        self.state = ClusterState(_nodes(nodes), levels=("spine", "leaf"))
        self.sched = GangScheduler(self.state, clock=lambda: self.clock,
                                   retry=RetryPolicy(index=index))
        self.cycle = Cycle(self.sched, self)
        self.rng = random.Random(seed)
        self.durations = random.Random(seed + 1)
        self.running: dict[str, tuple[float, Placement]] = {}
        self.log: list[tuple[int, str, tuple[str, ...]]] = []
        self.event = 0
        self.made = 0

    def bind(self, placement: Placement) -> None:
        for binding in placement.bindings:
            self.state.confirm(binding.pod.uid)
        ends = self.clock + self.durations.uniform(1.0, 100.0)
        self.running[placement.gang] = (ends, placement)
        self.log.append((self.event, placement.gang,
                         tuple(b.node for b in placement.bindings)))

    def submit(self) -> None:
        self.made += 1
        self.sched.submit(_gang(self.rng, f"g{self.made:05d}", self.clock))

    def step(self) -> tuple[float, int]:
        """One cycle: (CPU seconds, pods placed)."""
        self.event += 1
        placed = len(self.log)
        started = time.process_time()
        outcome = self.cycle.run()
        cpu = time.process_time() - started
        del outcome
        pods = sum(len(p) for _, _, p in self.log[placed:])
        return cpu, pods

    def finish_one(self) -> None:
        """The running gang that ends first stops (its pods leave)."""
        key = min(self.running, key=lambda k: (self.running[k][0], k))
        ends, placement = self.running.pop(key)
        self.clock = max(self.clock, ends)
        for binding in placement.bindings:
            self.state.remove(binding.pod.uid)


def _one(nodes: int, gangs: int, events: int, seed: int, index: bool,
         report: Report) -> tuple[QueueRun, list[tuple[int, str, tuple[str, ...]]]]:
    world = _World(nodes, index, seed)
    label = "index" if index else "every gang"
    # Empty queue: one arrival per event until an arrival no longer fits.
    empty_cpu: list[float] = []
    empty_pods = 0
    while True:
        world.submit()
        cpu, pods = world.step()
        empty_cpu.append(cpu)
        empty_pods += pods
        if not pods:
            break
    report(f"{label}: empty queue, {len(empty_cpu)} events, cluster full")
    for _ in range(gangs - 1):
        world.submit()
    started = time.process_time()
    world.step()
    first = time.process_time() - started
    deep_cpu: list[float] = []
    deep_pods = 0
    queued_min = len(world.sched.queue)
    tried_before = world.sched.wake.stats.tried
    for _ in range(events):
        world.finish_one()
        world.submit()
        cpu, pods = world.step()
        deep_cpu.append(cpu)
        deep_pods += pods
        queued_min = min(queued_min, len(world.sched.queue))
    tried = world.sched.wake.stats.tried - tried_before
    report(f"{label}: deep queue, {events} events, at least {queued_min} gangs waiting")
    run = QueueRun(
        index=index,
        empty_events=len(empty_cpu),
        empty_cpu_ms_p50=round(_pct(empty_cpu, 50) * 1000, 3),
        empty_cpu_ms_p95=round(_pct(empty_cpu, 95) * 1000, 3),
        empty_pods_per_cpu_second=round(empty_pods / max(sum(empty_cpu), 1e-9), 1),
        deep_events=events,
        deep_queued_min=queued_min,
        deep_cpu_ms_p50=round(_pct(deep_cpu, 50) * 1000, 3),
        deep_cpu_ms_p95=round(_pct(deep_cpu, 95) * 1000, 3),
        deep_cpu_ms_max=round(max(deep_cpu, default=0.0) * 1000, 3),
        deep_pods_per_cpu_second=round(deep_pods / max(sum(deep_cpu), 1e-9), 1),
        first_cycle_ms=round(first * 1000, 3),
        tried_per_event=round(tried / events, 2),
        retries=world.sched.wake.stats.to_json(),
    )
    return run, world.log


def queue_bench(nodes: int = 1000, gangs: int = 2000, events: int = 500, seed: int = 1,
                report: Report = _silent) -> QueueResult:
    """Both runs (index, then every gang) on the same draw; see the module doc."""
    if nodes < NODES_PER_LEAF or gangs < 1 or events < 1:
        raise ValueError(f"--nodes must be at least {NODES_PER_LEAF}, --gangs and --events "
                         "at least 1")
    indexed, log_a = _one(nodes, gangs, events, seed, True, report)
    every, log_b = _one(nodes, gangs, events, seed, False, report)
    one, five, fifteen = os.getloadavg()
    return QueueResult(nodes, gangs, events, seed, (indexed, every), log_a == log_b,
                       (round(one, 2), round(five, 2), round(fifteen, 2)))
