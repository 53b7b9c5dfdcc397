"""Admission through a cohort tree next to the flat decision, in one run.

``bench placement --queues Q --cohort-depth D``: the realistic snapshot of
``placement_at_scale`` and its gang, decided two ways, alternating:

* *flat*: today's decision with no queues configured: ``place_gang`` alone (the runtime's
  admission answers at once when no queue is configured);
* *tree*: the scheduler's admission first, exactly as the runtime asks it
  (``QueueLedger.refusal(queue, gang_amounts(gang))``, fair sharing on), then
  ``place_gang``. The ledger holds Q queues under a tree of D cohort levels (a root, then
  ``b`` children per cohort, ``b`` the smallest whole number with ``b**D >= Q``; queues
  spread over the lowest level), quotas on GPUs, CPU, memory and RDMA, lending limits,
  weights 1-4 (64 for the bench gang's queue and its cohorts), the root cohort holding
  quota of its own. Every other queue borrows (its usage is 1.5-2 times its nominal
  quota) and has a gang waiting that its quota admits; the bench gang borrows (its queue
  holds its nominal quota) with the lowest share, so it is admitted only after fair
  sharing has weighed every waiting queue where its path meets the gang's: the full
  walk, not an early refusal. The bench checks that the admission
  answers None (admitted) and that the gang borrows.

The per-cycle part (``set_waiting``: what each queue has waiting, once per cycle, not
per gang) is timed on its own. Each figure is wall time and this thread's CPU time. Each
cold decision starts after a ``gc.collect()`` (the previous fresh copy's garbage would
otherwise land in whichever decision comes next).
"""

from __future__ import annotations

import gc
import math
import random
import statistics
from dataclasses import dataclass
from typing import Any

from trainmaster.scheduler import (
    CPU,
    GPU,
    MEMORY,
    ClusterState,
    CohortSpec,
    FairSharing,
    Gang,
    Placement,
    QueueLedger,
    QueueSpec,
    ResourceQuota,
    gang_amounts,
    place_gang,
)

from ._placement import RDMA, _Clock, realistic_gang, realistic_snapshot

_GI = 1 << 30
BENCH_QUEUE = "q-000"


@dataclass(frozen=True, slots=True)
class QueueTree:
    queues: list[QueueSpec]
    cohorts: list[CohortSpec]
    waiting: list[tuple[str, dict[str, int]]]
    """One gang's needs per queue but the bench gang's: what the cycle has waiting."""
    usage: dict[str, dict[str, int]]
    """What each queue holds (base units)."""


def _per_node() -> dict[str, int]:
    return {GPU: 8, CPU: 192_000, MEMORY: 2048 * _GI, RDMA: 64}


def _quota(amounts: dict[str, int], fraction: float, lending: bool) -> dict[str, ResourceQuota]:
    out = {}
    for r, q in amounts.items():
        nominal = int(q * fraction)
        out[r] = ResourceQuota(nominal, None, nominal // 2 if lending else None)
    return out


def queue_tree(nodes: int, queues: int, depth: int, seed: int = 0) -> QueueTree:
    """The tree of the module doc over a cluster of ``nodes`` realistic nodes."""
    if queues < 2 or depth < 1:
        raise ValueError(f"need 2+ queues and 1+ cohort levels, got {queues}, {depth}")
    branch = 2
    while branch**depth < queues:
        branch += 1
    capacity = {r: q * nodes for r, q in _per_node().items()}
    cohorts = [CohortSpec("c0", None, _quota(capacity, 0.5, False), 1.0)]
    level = ["c0"]
    for _ in range(1, depth):
        below = []
        for parent in level:
            for k in range(branch):
                name = f"{parent}-{k}"
                # The bench queue's cohorts (c0-0, c0-0-0, ...) weigh most, as it does.
                weight = 64.0 if set(name[3:]) <= {"0", "-"} else float(1 + (k % 3))
                cohorts.append(CohortSpec(name, parent, {}, weight))
                below.append(name)
        level = below
    rng = random.Random(seed)
    share = {r: q * 0.4 / queues for r, q in capacity.items()}
    specs: list[QueueSpec] = []
    usage: dict[str, dict[str, int]] = {}
    waiting: list[tuple[str, dict[str, int]]] = []
    for i in range(queues):
        name = f"q-{i:03d}"
        quotas = _quota({r: int(q) for r, q in share.items()}, 1.0, i % 2 == 1)
        gpu = quotas.pop(GPU)
        weight = 64.0 if name == BENCH_QUEUE else float(1 + i % 4)
        specs.append(QueueSpec(name, gpu.nominal, None, level[i % len(level)],
                               lending_limit=gpu.lending_limit, resources=quotas,
                               weight=weight))
        # Above nominal: every queue borrows (the bench queue holds its nominal quota,
        # so the gang borrows and its share stays the lowest).
        over = 1.0 if name == BENCH_QUEUE else 1.5 + 0.5 * rng.random()
        usage[name] = {r: int(q * over) for r, q in share.items()}
        if name != BENCH_QUEUE:
            waiting.append((name, {GPU: 32, CPU: 8 * 48_000, MEMORY: 8 * 512 * _GI,
                                   RDMA: 32}))
    return QueueTree(specs, cohorts, waiting, usage)


def tree_ledger(nodes: int, queues: int, depth: int,
                seed: int = 0) -> tuple[QueueLedger, list[tuple[str, dict[str, int]]]]:
    """The charged ledger (fair sharing on) and the cycle's waiting gangs."""
    tree = queue_tree(nodes, queues, depth, seed)
    ledger = QueueLedger(tree.queues, cohorts=tree.cohorts, fair=FairSharing(enable=True))
    for name, amounts in tree.usage.items():
        ledger.charge(f"running/{name}", name, amounts)
    return ledger, tree.waiting


@dataclass(frozen=True, slots=True)
class AdmissionResult:
    nodes: int
    pods: int
    gang: int
    queues: int
    cohorts: int
    depth: int
    flat: dict[str, float]
    tree: dict[str, float]
    """Medians (ms): cold, warm and their CPU times; tree also admission alone and the
    per-cycle ``set_waiting``."""
    level: str

    def ratio(self, key: str) -> float:
        return round(self.tree[key] / self.flat[key], 3) if self.flat[key] else math.nan

    def to_json(self) -> dict[str, Any]:
        keys = ("cold_ms", "warm_ms", "cold_cpu_ms", "warm_cpu_ms")
        return {"nodes": self.nodes, "pods": self.pods, "gang": self.gang,
                "queues": self.queues, "cohorts": self.cohorts, "cohort_depth": self.depth,
                "flat": self.flat, "tree": self.tree,
                "tree_over_flat": {k: self.ratio(k) for k in keys}, "level": self.level}


def _median_ms(values: list[float]) -> float:
    return round(statistics.median(values) * 1000, 4)


def _admit(ledger: QueueLedger, gang: Gang) -> None:
    reason = ledger.refusal(BENCH_QUEUE, gang_amounts(gang))
    if reason is not None:
        raise RuntimeError(f"the bench gang must be admitted through the tree: {reason}")


def admission_at_scale(nodes: int = 10_000, gang: int = 64, runs: int = 20,
                       cold_runs: int = 5, pods_per_node: int = 10, queues: int = 100,
                       depth: int = 3, seed: int = 0) -> AdmissionResult:
    """Flat and tree decisions on one snapshot, alternating (module doc)."""
    snap, pods = realistic_snapshot(nodes, pods_per_node, seed)
    ledger, waiting = tree_ledger(nodes, queues, depth, seed)
    entries = [*waiting, (BENCH_QUEUE, gang_amounts(realistic_gang(gang, "probe")))]
    ledger.set_waiting(entries)
    if ledger.within_nominal(BENCH_QUEUE, gang_amounts(realistic_gang(gang, "probe"))):
        raise RuntimeError("the bench queue must borrow for the gang")
    flat_cold, tree_cold, flat_warm, tree_warm = _Clock(), _Clock(), _Clock(), _Clock()
    admit, cycle = _Clock(), _Clock()
    level = "unschedulable"

    def decide(state: ClusterState, target: Gang, clock: _Clock, tree: bool) -> str:
        clock.start()
        if tree:
            _admit(ledger, target)
        decision = place_gang(state, target)
        clock.stop()
        return decision.level if isinstance(decision, Placement) else "unschedulable"

    for k in range(cold_runs):
        order = (False, True) if k % 2 == 0 else (True, False)
        for tree in order:
            fresh = snap.copy()
            target = realistic_gang(gang, f"cold{k}{'t' if tree else 'f'}")
            gc.collect()  # the last copy's garbage is not either side's decision
            level = decide(fresh, target, tree_cold if tree else flat_cold, tree)
            del fresh
    target = realistic_gang(gang, "warm")
    place_gang(snap, target)
    for k in range(runs):
        for tree in ((False, True) if k % 2 == 0 else (True, False)):
            decide(snap, target, tree_warm if tree else flat_warm, tree)
        admit.start()
        _admit(ledger, target)
        admit.stop()
        cycle.start()
        ledger.set_waiting(entries)
        cycle.stop()

    def figures(cold: _Clock, warm: _Clock) -> dict[str, float]:
        return {"cold_ms": _median_ms(cold.wall), "warm_ms": _median_ms(warm.wall),
                "cold_cpu_ms": _median_ms(cold.cpu), "warm_cpu_ms": _median_ms(warm.cpu)}

    tree_figures = {**figures(tree_cold, tree_warm), "admission_ms": _median_ms(admit.wall),
                    "admission_cpu_ms": _median_ms(admit.cpu),
                    "cycle_start_ms": _median_ms(cycle.wall),
                    "cycle_start_cpu_ms": _median_ms(cycle.cpu)}
    return AdmissionResult(nodes, pods, gang, queues, len(ledger.cohort_nodes), depth,
                           figures(flat_cold, flat_warm), tree_figures, level)
