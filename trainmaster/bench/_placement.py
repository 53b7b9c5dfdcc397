"""The placement core alone: how long one gang's decision takes on a large cluster.

No API server: a ``ClusterSnapshot`` of N nodes (8 GPUs, 20 per leaf, 25 leaves per
spine), half of its GPUs taken by 2-GPU pods spread at random (a fragmented,
realistic state), then ``place_gang`` for one gang of G pods x 4 GPUs that prefers one
leaf. *cold* is the first decision for that pod signature (it evaluates the static
filters on every node, then caches them per snapshot); *warm* is every later one (the
steady state: the cache only resets when a node changes).
"""

from __future__ import annotations

import random
import statistics
import time
from dataclasses import dataclass

from trainmaster.scheduler import (
    GPU,
    ClusterSnapshot,
    Gang,
    NodeInfo,
    Placement,
    PodRequest,
    TopologyConstraint,
    TopologyMode,
    place_gang,
)


@dataclass(frozen=True, slots=True)
class PlacementResult:
    nodes: int
    gang: int
    cold_ms: float
    warm_median_ms: float
    warm_max_ms: float
    runs: int
    level: str


def _snapshot(nodes: int, seed: int) -> ClusterSnapshot:
    infos = [
        NodeInfo(f"n{i:05d}", {GPU: 8, "cpu": 128_000, "pods": 110},
                 topology=(f"spine-{i // 500}", f"leaf-{i // 20}"))
        for i in range(nodes)
    ]
    snap = ClusterSnapshot(infos, levels=("spine", "leaf"))
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
