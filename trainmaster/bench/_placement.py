"""The placement core alone: how long one gang's decision takes on a large cluster.

No API server. Two workloads:

* ``placement_microbench`` (the table's first rows, kept for continuity): a plain
  ``ClusterState`` of N nodes (8 GPUs, 20 per leaf, 25 leaves per spine), half of its
  GPUs taken by 2-GPU pods, one gang of G pods x 4 GPUs that prefers one leaf.
* ``placement_at_scale`` (``--json``): nodes that look real. Every node has its own
  hostname and a zone, instance type and GPU product label; GPU nodes carry the
  ``nvidia.com/gpu`` taint, 3% a maintenance taint, 2% are cordoned, 10% are an older
  GPU model the gang's node selector excludes. Nodes have CPU, memory, 8 GPUs and RDMA
  devices; ~10 pods per node (so 100,000 pods at 10,000 nodes), GPU pods using half of
  the GPUs plus CPU-only pods. The gang's pods ask for GPUs, CPU, memory and RDMA, carry
  a node selector and a toleration, and prefer one leaf.

What is timed, per decision (``place_gang``, nothing assumed):

* *cold*: on a fresh copy of the snapshot, with new pod objects: nothing cached (no
  filter answers, no pod keys); median of ``cold_runs`` copies.
* *warm*: the same gang again on the same snapshot; median of ``runs``.
* *node event*: one ``set_node`` (update: allocatable, labels, taints or cordon; or an
  add) or ``remove_node`` applied to the snapshot, under churn: events arrive between
  gang placements (each gang is assumed, then forgotten), so caches are warm and then
  touched; median of every event.
* each of the three also as this thread's CPU time (``thread_time``), which a loaded
  machine does not inflate.
* *rss*: this process's resident memory (``VmRSS`` in ``/proc/self/status``) with the
  snapshot holding every node and pod.
"""

from __future__ import annotations

import random
import statistics
import time
from dataclasses import dataclass, replace
from pathlib import Path

from trainmaster.api import HOSTNAME_LABEL
from trainmaster.scheduler import (
    CPU,
    GPU,
    MEMORY,
    ClusterState,
    Gang,
    NodeInfo,
    Placement,
    PodRequest,
    Taint,
    TaintEffect,
    Toleration,
    TolerationOperator,
    TopologyConstraint,
    TopologyMode,
    place_gang,
)

RDMA = "rdma/hca_shared_devices_a"
_GI = 1 << 30
_PRODUCT = "nvidia.com/gpu.product"


@dataclass(frozen=True, slots=True)
class PlacementResult:
    nodes: int
    gang: int
    cold_ms: float
    warm_median_ms: float
    warm_max_ms: float
    runs: int
    level: str


@dataclass(frozen=True, slots=True)
class ScaleResult:
    """``bench placement --json``: medians (ms) and ranges of the realistic workload."""

    nodes: int
    pods: int
    gang: int
    cold_ms: float
    cold_range_ms: tuple[float, float]
    warm_ms: float
    warm_range_ms: tuple[float, float]
    node_event_ms: float
    node_event_range_ms: tuple[float, float]
    node_events: int
    rss_mb: float
    level: str
    cold_cpu_ms: float = 0.0
    """Medians of this thread's CPU time: what the decision costs without the wait for
    a core (the wall-clock medians above include it)."""
    warm_cpu_ms: float = 0.0
    node_event_cpu_ms: float = 0.0

    def to_json(self) -> dict[str, object]:
        return {
            "nodes": self.nodes,
            "cold_ms": self.cold_ms,
            "warm_ms": self.warm_ms,
            "node_event_ms": self.node_event_ms,
            "rss_mb": self.rss_mb,
            "pods": self.pods,
            "gang": self.gang,
            "cold_range_ms": list(self.cold_range_ms),
            "warm_range_ms": list(self.warm_range_ms),
            "node_event_range_ms": list(self.node_event_range_ms),
            "node_events": self.node_events,
            "cold_cpu_ms": self.cold_cpu_ms,
            "warm_cpu_ms": self.warm_cpu_ms,
            "node_event_cpu_ms": self.node_event_cpu_ms,
            "level": self.level,
        }


def _snapshot(nodes: int, seed: int) -> ClusterState:
    infos = [
        NodeInfo(f"n{i:05d}", {GPU: 8, "cpu": 128_000, "pods": 110},
                 topology=(f"spine-{i // 500}", f"leaf-{i // 20}"))
        for i in range(nodes)
    ]
    snap = ClusterState(infos, levels=("spine", "leaf"))
    rng = random.Random(seed)
    filler = 0
    for info in infos:
        for _ in range(rng.randint(0, 4)):  # 0-8 of 8 GPUs, 4 on average
            pod = PodRequest(f"fill-{filler}", requests={GPU: 2})
            filler += 1
            snap.assume(pod, info.name)
    return snap


def placement_microbench(
    nodes: int = 10_000, gang: int = 64, runs: int = 20, seed: int = 0
) -> PlacementResult:
    snap = _snapshot(nodes, seed)
    members = tuple(PodRequest(f"w{i}", namespace="bench", requests={GPU: 4}, gang="g")
                    for i in range(gang))
    target = Gang("g", members, namespace="bench",
                  topology=TopologyConstraint("leaf", TopologyMode.PREFERRED))
    started = time.perf_counter()
    first = place_gang(snap, target)
    cold = time.perf_counter() - started
    warm = []
    for _ in range(runs):
        started = time.perf_counter()
        place_gang(snap, target)
        warm.append(time.perf_counter() - started)
    level = first.level if isinstance(first, Placement) else "unschedulable"
    return PlacementResult(nodes, gang, round(cold * 1000, 2),
                           round(statistics.median(warm) * 1000, 2),
                           round(max(warm) * 1000, 2), runs, level)


# --- the realistic workload -------------------------------------------------------------

_GPU_TAINT = Taint("nvidia.com/gpu", "present", TaintEffect.NO_SCHEDULE)
_MAINTENANCE = Taint("example.com/maintenance", "true", TaintEffect.NO_SCHEDULE)


def realistic_node(i: int, rng: random.Random) -> NodeInfo:
    """Node ``i`` of a 20-per-leaf, 25-leaves-per-spine fabric, drawn from ``rng``."""
    older = rng.random() < 0.10
    taints = [_GPU_TAINT]
    if rng.random() < 0.03:
        taints.append(_MAINTENANCE)
    labels = {
        HOSTNAME_LABEL: f"gpu-{i:05d}",
        "kubernetes.io/os": "linux",
        "topology.kubernetes.io/zone": f"zone-{i // 2500}",
        "node.kubernetes.io/instance-type": "a100.8x" if older else "h100.8x",
        _PRODUCT: "A100" if older else "H100",
        "network.example.com/leaf": f"leaf-{i // 20}",
    }
    return NodeInfo(
        f"gpu-{i:05d}",
        {GPU: 8, CPU: 192_000, MEMORY: 2048 * _GI, RDMA: 64, "pods": 110},
        labels=labels,
        taints=tuple(taints),
        unschedulable=rng.random() < 0.02,
        topology=(f"spine-{i // 500}", f"leaf-{i // 20}"),
        requested={CPU: 4_000, MEMORY: 16 * _GI},  # daemonsets the scheduler does not track
    )


def realistic_snapshot(
    nodes: int, pods_per_node: int = 10, seed: int = 0
) -> tuple[ClusterState, int]:
    """The snapshot and how many pods it tracks (bound): half the GPUs in 1/2/4-GPU pods,
    the rest of ``pods_per_node`` per node CPU-only."""
    rng = random.Random(seed)
    infos = [realistic_node(i, rng) for i in range(nodes)]
    snap = ClusterState(infos, levels=("spine", "leaf"))
    count = 0
    for info in infos:
        used = rng.randint(0, 8)  # 4 of 8 on average
        sizes: list[int] = []
        while used:
            size = min(rng.choice((1, 2, 4)), used)
            sizes.append(size)
            used -= size
        for k in range(pods_per_node):
            if k < len(sizes):
                g = sizes[k]
                req = {GPU: g, CPU: 16_000 * g, MEMORY: 128 * _GI * g, RDMA: g}
            else:
                req = {CPU: rng.choice((250, 500, 1000)), MEMORY: rng.choice((1, 2, 4)) * _GI}
            pod = PodRequest(f"p{count}", namespace=f"team-{count % 50}", requests=req,
                             uid=f"uid-{count:07d}")
            snap.add_bound(pod, info.name)
            count += 1
    return snap, count


def realistic_gang(size: int, tag: str) -> Gang:
    """``size`` pods x 4 GPUs (+ CPU, memory, RDMA) that tolerate the GPU taint, select
    H100 nodes and prefer one leaf. ``tag`` makes the pod objects new (cold pod keys)."""
    tolerations = (Toleration("nvidia.com/gpu", TolerationOperator.EXISTS),)
    members = tuple(
        PodRequest(f"w{i}", namespace="bench", uid=f"{tag}-w{i}",
                   requests={GPU: 4, CPU: 48_000, MEMORY: 512 * _GI, RDMA: 4},
                   node_selector={_PRODUCT: "H100"}, tolerations=tolerations, gang="g")
        for i in range(size)
    )
    return Gang("g", members, namespace="bench",
                topology=TopologyConstraint("leaf", TopologyMode.PREFERRED))


def rss_mb() -> float:
    """This process's resident memory in MiB (``VmRSS``; Linux ``/proc``)."""
    for line in Path("/proc/self/status").read_text().splitlines():
        if line.startswith("VmRSS:"):
            return round(int(line.split()[1]) / 1024, 1)
    raise RuntimeError("no VmRSS in /proc/self/status")


def _node_event(snap: ClusterState, rng: random.Random, added: list[str],
                next_index: int, clock: _Clock) -> int:
    """One timed node event (70% update, 15% add, 15% delete of a node added earlier);
    returns the next unused node number."""
    roll = rng.random()
    if roll < 0.15 or (roll >= 0.85 and not added):
        info = realistic_node(next_index, rng)
        clock.start()
        snap.set_node(info)
        clock.stop()
        added.append(info.name)
        return next_index + 1
    if roll >= 0.85:
        name = added.pop(rng.randrange(len(added)))
        clock.start()
        snap.remove_node(name)
        clock.stop()
        return next_index
    nodes = snap.columns.nodes
    old = nodes[rng.randrange(len(nodes))]
    kind = rng.randrange(4)
    if kind == 0:  # a GPU went unhealthy or came back
        alloc = dict(old.allocatable)
        alloc[GPU] = 8 if alloc.get(GPU, 0) < 8 else 7
        info = replace(old, allocatable=alloc)
    elif kind == 1:  # untracked usage changed (a daemonset pod)
        cpu = old.requested.get(CPU, 0)
        info = replace(old, requested={CPU: rng.choice([c for c in (2_000, 4_000, 6_000)
                                                        if c != cpu]),
                                       MEMORY: 16 * _GI})
    elif kind == 2:  # maintenance taint on or off
        taints = tuple(t for t in old.taints if t != _MAINTENANCE)
        if taints == old.taints:
            taints = (*taints, _MAINTENANCE)
        info = replace(old, taints=taints)
    else:  # cordon or uncordon
        info = replace(old, unschedulable=not old.unschedulable)
    clock.start()
    snap.set_node(info)
    clock.stop()
    return next_index


class _Clock:
    """Wall time (``perf_counter``) and this thread's CPU time (``thread_time``) of each
    timed call: on a loaded machine the wall time includes waiting for a core."""

    def __init__(self) -> None:
        self.wall: list[float] = []
        self.cpu: list[float] = []
        self._wall = self._cpu = 0.0

    def start(self) -> None:
        self._cpu = time.thread_time()
        self._wall = time.perf_counter()

    def stop(self) -> None:
        self.wall.append(time.perf_counter() - self._wall)
        self.cpu.append(time.thread_time() - self._cpu)


def _spread(values: list[float]) -> tuple[float, tuple[float, float]]:
    ms = [v * 1000 for v in values]
    return round(statistics.median(ms), 3), (round(min(ms), 3), round(max(ms), 3))


def placement_at_scale(
    nodes: int = 10_000,
    gang: int = 64,
    runs: int = 20,
    cold_runs: int = 5,
    events: int = 200,
    pods_per_node: int = 10,
    seed: int = 0,
) -> ScaleResult:
    """The realistic workload (module doc): cold, warm, node events under churn, RSS."""
    snap, pods = realistic_snapshot(nodes, pods_per_node, seed)
    memory = rss_mb()
    cold = _Clock()
    level = "unschedulable"
    for k in range(cold_runs):
        fresh = snap.copy()
        target = realistic_gang(gang, f"cold{k}")
        cold.start()
        first = place_gang(fresh, target)
        cold.stop()
        level = first.level if isinstance(first, Placement) else "unschedulable"
        del fresh
    target = realistic_gang(gang, "warm")
    place_gang(snap, target)
    warm = _Clock()
    for _ in range(runs):
        warm.start()
        place_gang(snap, target)
        warm.stop()
    rng = random.Random(seed + 1)
    added: list[str] = []
    next_index = nodes
    event = _Clock()
    per_gang = 5  # node events between two gang placements
    while len(event.wall) < events:
        for _ in range(per_gang):
            next_index = _node_event(snap, rng, added, next_index, event)
        decision = place_gang(snap, target)
        if isinstance(decision, Placement):  # charge it, then give it back: steady state
            for binding in decision.bindings:
                snap.assume(binding.pod, binding.node)
            for binding in decision.bindings:
                snap.forget(binding.pod.uid)
    cold_ms, cold_range = _spread(cold.wall)
    warm_ms, warm_range = _spread(warm.wall)
    event_ms, event_range = _spread(event.wall)
    return ScaleResult(nodes, pods, gang, cold_ms, cold_range, warm_ms, warm_range,
                       event_ms, event_range, len(event.wall), memory, level,
                       _spread(cold.cpu)[0], _spread(warm.cpu)[0], _spread(event.cpu)[0])
