"""`trainmaster bench preemption`: domain-freeing preemption against the exact optimum.

Each case is a packed cluster small enough for an exhaustive search: 4-16 leaves of
4-16 nodes (8 GPUs each), filled with running gangs of mixed pod sizes (2, 4 or 8
GPUs), priorities (a few above the preemptor: they may not be evicted), checkpoint ages
(uniform within a checkpoint interval of 10 min to 2 h), restart costs (30-300 s) and
elastic ranges (a fifth of the multi-pod gangs). A gang required in one leaf arrives
that no leaf holds now. Four answers per case:

* **optimum**: every leaf, every assignment of keep / shrink (elastic) / stop to every
  evictable gang in it, by plain arithmetic on free GPUs (this module's own code, not
  the scheduler's); the least total lost work that makes the gang fit.
* **trainmaster**: ``select_victims`` as the scheduler calls it (domain-freeing search),
  on a ``ClusterState`` of the same cluster; its CPU time is the decision time.
* **today**: ``select_victims`` with ``domain_search=False``: the greedy order this
  scheduler used before (borrowed, priority, lost work, GPUs; then put back).
* **naive**: evict whole gangs, lowest priority first, then fewest pods, until some leaf
  holds the gang.

Lost work of a victim: GPUs x (seconds since its last checkpoint + restart seconds); a
shrink (members above an elastic gang's minimum) costs a rescale, every GPU of the gang
idle ``DEFAULT_RESCALE_SECONDS``; a stop of an elastic gang costs both, as in the
scheduler. An *unused eviction* is an evicted pod whose gang (or shrink) could have
stayed with the preemptor still fitting in the leaf it gets, or any evicted pod outside
that leaf.

The scale row times the same decision on packed clusters of 64 leaves x 16 nodes
(1,024 nodes), one arriving gang each, as CPU time (``thread_time``). As in the
scheduler, the gang's placement was just tried on that state before the clock starts
(the cycle fails it, then calls the preemptor), and the garbage collector runs before.
"""

from __future__ import annotations

import gc
import itertools
import random
import statistics
import time
from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Any

from trainmaster.scheduler import (
    DEFAULT_FILTERS,
    DEFAULT_RESCALE_SECONDS,
    DEFAULT_SCORER,
    GPU,
    ClusterState,
    Gang,
    NodeInfo,
    PodRequest,
    TopologyConstraint,
    TopologyMode,
    Victim,
    elastic_parts,
    place_gang,
    select_victims,
)

NODE_GPUS = 8
PREEMPTOR_PRIORITY = 5
LEVELS = ("spine", "leaf")
MAX_GANGS_PER_LEAF = 8
"""Keeps the exhaustive search at most 3^8 assignments per leaf."""


@dataclass(frozen=True, slots=True)
class Running:
    name: str
    leaf: int
    priority: int
    pods: tuple[tuple[int, int], ...]
    """(node in its leaf, GPUs) per member, in rank order."""
    stop_cost: float
    """GPU-seconds since its last checkpoint plus its restart cost."""
    min_pods: int | None = None
    """Elastic: its minimum (the members above it are the shrink)."""

    @property
    def gpus(self) -> int:
        return sum(g for _, g in self.pods)

    @property
    def shrink_cost(self) -> float:
        return DEFAULT_RESCALE_SECONDS * self.gpus

    def options(self) -> list[tuple[float, tuple[int, ...]]]:
        """(cost, ranks evicted) per choice beyond keeping it: shrink, then stop."""
        out = []
        if self.min_pods is not None and self.min_pods < len(self.pods):
            out.append((self.shrink_cost, tuple(range(self.min_pods, len(self.pods)))))
            out.append((self.shrink_cost + self.stop_cost, tuple(range(len(self.pods)))))
        else:
            out.append((self.stop_cost, tuple(range(len(self.pods)))))
        return out


@dataclass(slots=True)
class Case:
    leaves: int
    per_leaf: int
    running: list[Running]
    size: int
    """The preemptor's pods."""
    pod_gpus: int

    def free(self) -> list[list[int]]:
        free = [[NODE_GPUS] * self.per_leaf for _ in range(self.leaves)]
        for run in self.running:
            for node, gpus in run.pods:
                free[run.leaf][node] -= gpus
        return free

    def fits(self, leaf_free: Sequence[int]) -> int:
        return sum(f // self.pod_gpus for f in leaf_free)


def generate(rng: random.Random, leaves: int, per_leaf: int) -> Case:
    running: list[Running] = []
    for leaf in range(leaves):
        free = [NODE_GPUS] * per_leaf
        target = rng.uniform(0.8, 1.0) * NODE_GPUS * per_leaf
        gangs = 0
        while sum(NODE_GPUS - f for f in free) < target and gangs < MAX_GANGS_PER_LEAF:
            pod = rng.choice((2, 4, 8, 8))
            room = sum(f // pod for f in free)
            if room == 0:
                break
            last = gangs == MAX_GANGS_PER_LEAF - 1
            size = room if last else rng.randint(1, max(1, min(room, per_leaf)))
            pods = []
            for _ in range(size):
                node = min((i for i in range(per_leaf) if free[i] >= pod),
                           key=lambda i: (free[i], i))
                free[node] -= pod
                pods.append((node, pod))
            interval = rng.choice((600.0, 1800.0, 3600.0, 7200.0))
            since = rng.uniform(0.0, interval) + rng.uniform(30.0, 300.0)
            priority = 9 if rng.random() < 0.1 else rng.randint(0, 2)
            elastic = size >= 2 and rng.random() < 0.2
            running.append(Running(
                f"r{leaf:02d}-{gangs}", leaf, priority, tuple(pods),
                round(since * pod * size, 1),
                rng.randint(1, size - 1) if elastic else None))
            gangs += 1
    pod_gpus = 8 if rng.random() < 0.7 else 4
    case = Case(leaves, per_leaf, running, 0, pod_gpus)
    now = max(case.fits(f) for f in case.free())
    case.size = now + 1 + rng.randint(0, max(0, per_leaf * NODE_GPUS // pod_gpus // 3))
    return case


# --- the exact search -------------------------------------------------------------------


@dataclass(frozen=True, slots=True)
class Answer:
    lost: float
    leaf: int
    evicted: tuple[tuple[str, tuple[int, ...]], ...]
    """(gang, ranks) evicted."""
    exact: bool = True
    """False when the scheduler's search ran out of steps."""


def optimum(case: Case) -> Answer | None:
    free = case.free()
    best: Answer | None = None
    for leaf in range(case.leaves):
        items = [r for r in case.running
                 if r.leaf == leaf and r.priority < PREEMPTOR_PRIORITY]
        choices: list[list[tuple[float, tuple[int, ...]]]] = [
            [(0.0, ()), *r.options()] for r in items]
        for pick in itertools.product(*choices):
            cost = sum(c for c, _ in pick)
            if best is not None and cost >= best.lost:
                continue
            room = list(free[leaf])
            for run, (_, ranks) in zip(items, pick, strict=True):
                for rank in ranks:
                    node, gpus = run.pods[rank]
                    room[node] += gpus
            if case.fits(room) >= case.size:
                best = Answer(cost, leaf, tuple(
                    (run.name, ranks) for run, (_, ranks) in zip(items, pick, strict=True)
                    if ranks))
    return best


def unused_pods(case: Case, evicted: Sequence[tuple[str, tuple[int, ...]]]) -> int:
    """Evicted pods the preemptor did not need: outside the leaf it fits in, or of a
    gang (or a stop over a shrink) that could have stayed."""
    by_name = {r.name: r for r in case.running}
    free = case.free()

    def room_with(chosen: Sequence[tuple[str, tuple[int, ...]]], leaf: int) -> int:
        room = list(free[leaf])
        for name, ranks in chosen:
            run = by_name[name]
            if run.leaf == leaf:
                for rank in ranks:
                    node, gpus = run.pods[rank]
                    room[node] += gpus
        return case.fits(room)

    leaves = [leaf for leaf in range(case.leaves) if room_with(evicted, leaf) >= case.size]
    if not leaves:
        return sum(len(ranks) for _, ranks in evicted)  # it does not even fit
    leaf = min(leaves, key=lambda lf: sum(len(r) for n, r in evicted
                                          if by_name[n].leaf == lf))
    unused = sum(len(ranks) for name, ranks in evicted if by_name[name].leaf != leaf)
    inside = [(n, r) for n, r in evicted if by_name[n].leaf == leaf]
    for k, (name, ranks) in enumerate(inside):
        run = by_name[name]
        rest = [e for j, e in enumerate(inside) if j != k]
        if room_with(rest, leaf) >= case.size:
            unused += len(ranks)
        elif run.min_pods is not None and len(ranks) == len(run.pods) and room_with(
                [*rest, (name, tuple(range(run.min_pods, len(run.pods))))],
                leaf) >= case.size:
            unused += run.min_pods  # a shrink would have done
    return unused


# --- the scheduler's answers -------------------------------------------------------------


def build(case: Case) -> tuple[ClusterState, list[Victim], Gang]:
    nodes = [NodeInfo(f"l{leaf:02d}-n{n:02d}", {GPU: NODE_GPUS, "pods": 110},
                      topology=("spine-0", f"leaf-{leaf:02d}"))
             for leaf in range(case.leaves) for n in range(case.per_leaf)]
    snap = ClusterState(nodes, LEVELS)
    victims: list[Victim] = []
    for run in case.running:
        pods = []
        for rank, (node, gpus) in enumerate(run.pods):
            pod = PodRequest(f"{run.name}-{rank:03d}", requests={GPU: gpus},
                             gang=run.name, priority=run.priority)
            where = f"l{run.leaf:02d}-n{node:02d}"
            snap.add_bound(pod, where)
            pods.append((pod, where))
        if run.priority >= PREEMPTOR_PRIORITY:
            continue
        victim = Victim(f"default/{run.name}", run.priority, tuple(pods), run.stop_cost)
        if run.min_pods is not None:
            victims.extend(elastic_parts(victim, run.min_pods))
        else:
            victims.append(victim)
    members = tuple(PodRequest(f"new-{i:03d}", requests={GPU: case.pod_gpus}, gang="new",
                               priority=PREEMPTOR_PRIORITY) for i in range(case.size))
    gang = Gang("new", members, topology=TopologyConstraint("leaf", TopologyMode.REQUIRED),
                priority=PREEMPTOR_PRIORITY)
    return snap, victims, gang


def _evicted(victims: Sequence[Victim]) -> list[tuple[str, tuple[int, ...]]]:
    by_gang: dict[str, list[int]] = {}
    for victim in victims:
        name = victim.gang.split("/", 1)[1]
        for pod, _ in victim.pods:
            by_gang.setdefault(name, []).append(int(pod.name.rsplit("-", 1)[1]))
    return [(name, tuple(sorted(ranks))) for name, ranks in by_gang.items()]


def scheduler_answer(case: Case, domain_search: bool) -> tuple[Answer | None, float]:
    """(the scheduler's choice, its CPU seconds)."""
    snap, victims, gang = build(case)
    # As in the scheduler, the cycle has just tried to place the gang (warm filter
    # answers); the collector runs before the clock, not inside it.
    place_gang(snap, gang)
    gc.collect()
    start = time.thread_time()
    found = select_victims(snap, gang, victims, filters=DEFAULT_FILTERS,
                           scorer=DEFAULT_SCORER, domain_search=domain_search)
    spent = time.thread_time() - start
    if found is None:
        return None, spent
    leaf = int(found.placement.bindings[0].node[1:3])  # l{leaf:02d}-n{node:02d}
    return Answer(found.work_lost, leaf, tuple(_evicted(found.victims)), found.exact), spent


def naive_answer(case: Case) -> Answer | None:
    order = sorted((r for r in case.running if r.priority < PREEMPTOR_PRIORITY),
                   key=lambda r: (r.priority, len(r.pods), r.name))
    free = case.free()
    evicted: list[tuple[str, tuple[int, ...]]] = []
    lost = 0.0
    for run in order:
        for node, gpus in run.pods:
            free[run.leaf][node] += gpus
        evicted.append((run.name, tuple(range(len(run.pods)))))
        lost += run.options()[-1][0]
        fitting = [leaf for leaf in range(case.leaves) if case.fits(free[leaf]) >= case.size]
        if fitting:
            return Answer(lost, fitting[0], tuple(evicted))
    return None


# --- the run -------------------------------------------------------------------------------


@dataclass(slots=True)
class Method:
    ratios: list[float] = field(default_factory=list)
    unused: int = 0
    missed: int = 0
    """Cases with a solution where this method found none."""
    seconds: list[float] = field(default_factory=list)
    inexact: int = 0
    """Decisions whose search ran out of steps (the best set found by then)."""

    def summary(self) -> dict[str, Any]:
        ratios = sorted(self.ratios)
        out: dict[str, Any] = {
            "ratio_median": round(statistics.median(ratios), 4) if ratios else None,
            "ratio_p95": round(_pct(ratios, 0.95), 4) if ratios else None,
            "ratio_max": round(ratios[-1], 4) if ratios else None,
            "optimal_cases": sum(1 for r in ratios if r <= 1.0 + 1e-9),
            "unused_evicted_pods": self.unused,
            "missed": self.missed,
            "budget_exhausted": self.inexact,
        }
        if self.seconds:
            ms = sorted(s * 1000 for s in self.seconds)
            out.update(decision_cpu_ms_median=round(statistics.median(ms), 3),
                       decision_cpu_ms_p95=round(_pct(ms, 0.95), 3),
                       decision_cpu_ms_max=round(ms[-1], 3))
        return out


def _pct(values: Sequence[float], q: float) -> float:
    """Nearest-rank percentile of sorted ``values``."""
    return values[min(len(values) - 1, max(0, -(-int(q * len(values) * 1000) // 1000) - 1))]


def _ratio(lost: float, best: float) -> float:
    if best <= 0:
        return 1.0 if lost <= 0 else float("inf")
    return lost / best


@dataclass(frozen=True, slots=True)
class PreemptionBench:
    cases: int
    seed: int
    solvable: int
    methods: dict[str, dict[str, Any]]
    scale: dict[str, Any]

    def to_json(self) -> dict[str, Any]:
        return {"cases": self.cases, "seed": self.seed, "solvable": self.solvable,
                "methods": self.methods, "scale": self.scale}


def run_preemption_bench(cases: int, seed: int, scale_decisions: int = 10) -> PreemptionBench:
    rng = random.Random(seed)
    methods = {"trainmaster": Method(), "today": Method(), "naive": Method()}
    solvable = 0
    for _ in range(cases):
        case = generate(rng, rng.randint(4, 16), rng.randint(4, 16))
        best = optimum(case)
        answers = {
            "trainmaster": scheduler_answer(case, domain_search=True),
            "today": scheduler_answer(case, domain_search=False),
            "naive": (naive_answer(case), 0.0),
        }
        if best is None:
            continue
        solvable += 1
        for name, (answer, spent) in answers.items():
            method = methods[name]
            if name != "naive":
                method.seconds.append(spent)
            if answer is None:
                method.missed += 1
                continue
            method.ratios.append(_ratio(answer.lost, best.lost))
            method.inexact += not answer.exact
            method.unused += unused_pods(case, answer.evicted)
    return PreemptionBench(cases, seed, solvable,
                           {k: m.summary() for k, m in methods.items()},
                           scale_row(random.Random(seed + 1), scale_decisions))


def scale_row(rng: random.Random, decisions: int, leaves: int = 64,
              per_leaf: int = 16) -> dict[str, Any]:
    """CPU time of the decision on a packed cluster of ``leaves`` x ``per_leaf`` nodes."""
    times: list[float] = []
    found = inexact = 0
    for _ in range(decisions):
        case = generate(rng, leaves, per_leaf)
        answer, spent = scheduler_answer(case, domain_search=True)
        times.append(spent * 1000)
        found += answer is not None
        inexact += answer is not None and not answer.exact
    times.sort()
    return {"nodes": leaves * per_leaf, "decisions": decisions, "found": found,
            "budget_exhausted": inexact,
            "cpu_ms_median": round(statistics.median(times), 2),
            "cpu_ms_max": round(times[-1], 2)}
