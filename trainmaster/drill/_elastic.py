"""The elastic drill on three real nodes: the real CPU job, elastic (min 1, max 3), loses
one node and goes on at two ranks from its checkpoint; the node returns and the job grows
back to three. Everything is measured from the files (the ranks' CRI log lines, stamped
by the runtime, and the checkpoint folder), as in _drill.

    elastic-shrink  the fault: the node lost (trainmaster.drill._faults.lose_node): its
                    kubelet stopped (SIGSTOP: the node goes NotReady 40 s later) and its
                    rank's container killed through containerd (the rank and its launcher
                    die at once, as with the node).
    elastic-grow    the node returns: kubelet resumed and trainmaster's fence lifted; the
                    Job's replacement pod is bound there, its launcher joins, the gang
                    checkpoints on demand and grows.

Per row: detect_seconds (fault -> the survivors' launchers start the new round),
recover_seconds (fault -> every rank of the new round has logged a step),
last_checkpoint_step (newest complete checkpoint on disk at the fault; for a grow the one
the new round resumed from), resumed_step, lost_steps, world_size_before/after, and for
the shrink operator_seconds (fault -> status.elastic.worldSize says the smaller size: the
operator waits for NotReady, the ranks do not).
"""

from __future__ import annotations

import re
import time
from dataclasses import dataclass
from typing import Any

from trainmaster.api import COMPLETION_INDEX_ANNOTATION, NODE_READY
from trainmaster.cluster import ClusterError
from trainmaster.drill._faults import lose_node
from trainmaster.drill._logs import STEP, LogLine, checkpoint_steps, pod_log
from trainmaster.drill._stack import RealStack, Report, _wait, job_pods, job_status
from trainmaster.kubeclient import SyncKube, api_path
from trainmaster.operator import unfence_nodes

ELASTIC_SCENARIOS = ("elastic-shrink", "elastic-grow")
ROUND = re.compile(r"elastic: round (\d+): world size (\d+) ")
RESUMED = re.compile(r"^rank 0: resumed from (\S+) at step (\d+)$")


def make_elastic(doc: dict[str, Any], job: str, low: int = 1, high: int = 3) -> dict[str, Any]:
    """The spec document with job `job` elastic from `low` to `high` nodes (at `high`)."""
    for entry in doc.get("jobs") or []:
        if entry.get("name") == job:
            entry["nodes"] = high
            entry["elastic"] = {"minNodes": low, "maxNodes": high}
            return doc
    raise ClusterError(f"the spec has no job {job!r} to make elastic")


@dataclass(frozen=True)
class RoundLog:
    """One launcher's lines from the start of round `number` on."""

    pod: str
    number: int
    world: int
    started: float
    lines: list[LogLine]

    def first_step(self) -> tuple[float, int] | None:
        for line in self.lines:
            if m := STEP.match(line.text):
                return line.time, int(m.group(2))
        return None

    def resumed(self) -> int | None:
        for line in self.lines:
            if m := RESUMED.match(line.text):
                return int(m.group(2))
        return None


def latest_round(lines: list[LogLine], pod: str) -> RoundLog | None:
    start = None
    for i, line in enumerate(lines):
        if ROUND.search(line.text):
            start = i
    if start is None:
        return None
    m = ROUND.search(lines[start].text)
    assert m is not None
    return RoundLog(pod, int(m.group(1)), int(m.group(2)), lines[start].time, lines[start:])


def last_step(lines: list[LogLine]) -> int:
    steps = [int(m.group(2)) for ln in lines if (m := STEP.match(ln.text))]
    return max(steps, default=0)


@dataclass(frozen=True)
class ElasticResult:
    scenario: str
    node: str
    what: str
    detect_seconds: float
    recover_seconds: float
    last_checkpoint_step: int | None
    resumed_step: int
    last_step_before: int
    steps_after: int
    world_size_before: int
    world_size_after: int
    operator_seconds: float | None = None

    @property
    def lost_steps(self) -> int:
        return self.last_step_before - self.resumed_step

    @property
    def ok(self) -> bool:
        return (self.last_checkpoint_step is not None
                and self.resumed_step >= self.last_checkpoint_step
                and self.steps_after > self.resumed_step
                and self.world_size_after == self.world_size_before
                + (1 if self.scenario == "elastic-grow" else -1))

    def row(self) -> dict[str, Any]:
        return {
            "scenario": self.scenario,
            "detect_seconds": round(self.detect_seconds, 2),
            "recover_seconds": round(self.recover_seconds, 2),
            "last_checkpoint_step": self.last_checkpoint_step,
            "checkpoint_at_start": self.last_checkpoint_step,
            "resumed_step": self.resumed_step,
            "lost_steps": self.lost_steps,
            "world_size_before": self.world_size_before,
            "world_size_after": self.world_size_after,
            "operator_seconds": None if self.operator_seconds is None
            else round(self.operator_seconds, 2),
            "ok": self.ok,
        }


def _index(pod: dict[str, Any]) -> int:
    return int((pod["metadata"].get("annotations") or {}).get(COMPLETION_INDEX_ANNOTATION, "0"))


def _rounds(stack: RealStack, kube: SyncKube) -> dict[int, tuple[str, RoundLog | None, int]]:
    """index -> (pod, its latest round, its last step) for the job's Running pods."""
    out: dict[int, tuple[str, RoundLog | None, int]] = {}
    for pod in job_pods(kube, stack.namespace, stack.job.name):
        if (pod.get("status") or {}).get("phase") != "Running":
            continue
        name = pod["metadata"]["name"]
        log = pod_log(stack.nodes, stack.namespace, name)
        lines = log.lines if log else []
        out[_index(pod)] = (name, latest_round(lines, name), last_step(lines))
    return out


def _training_at(stack: RealStack, kube: SyncKube, world: int, after_round: int,
                 report: Report, what: str) -> dict[int, tuple[str, RoundLog | None, int]]:
    def check() -> dict[int, tuple[str, RoundLog | None, int]] | None:
        rounds = _rounds(stack, kube)
        ready = {i: r for i, r in rounds.items()
                 if r[1] is not None and r[1].number > after_round and r[1].world == world
                 and r[1].first_step() is not None}
        report(f"{what}: launchers at rounds "
               f"{ {i: (r[1].number, r[1].world) if r[1] else None for i, r in rounds.items()} }"
               f", {len(ready)} of {world} training at world size {world}")
        return ready if len(ready) == world else None

    found: dict[int, tuple[str, RoundLog | None, int]] = _wait(
        check, f"{stack.job.name} to train at world size {world}", 300, 0.5)
    return found


def _result(scenario: str, node: str, what: str, since: float, before: int, after: int,
            ready: dict[int, tuple[str, RoundLog | None, int]], last_before: int,
            checkpoint: int | None, operator: float | None = None) -> ElasticResult:
    rounds = [r for _, r, _ in ready.values() if r is not None]
    firsts = [f for r in rounds if (f := r.first_step()) is not None]
    # Rank 0 is the leader's rank, not the lowest index: leadership stays where the first
    # round put it. Only rank 0 logs "rank 0: resumed from".
    resumed = next((step for r in rounds if (step := r.resumed()) is not None), None)
    return ElasticResult(
        scenario, node, what,
        detect_seconds=min(r.started for r in rounds) - since,
        recover_seconds=max(t for t, _ in firsts) - since,
        last_checkpoint_step=checkpoint,
        resumed_step=resumed if resumed is not None else 0,
        last_step_before=last_before,
        steps_after=min(s for _, _, s in ready.values()),
        world_size_before=before, world_size_after=after, operator_seconds=operator)


def run_elastic_drill(stack: RealStack, report: Report) -> list[ElasticResult]:
    """Shrink on a lost node, then grow when it returns; one result each."""
    if stack.job.elastic is None:
        raise ClusterError(f"{stack.job.name} is not elastic: give it `elastic:` first")
    high = stack.job.elastic.max_nodes
    with SyncKube.connect(stack.kubeconfig) as kube:
        ready = _training_at(stack, kube, high, 0, report, "before the fault")
        _wait(lambda: checkpoint_steps(stack.checkpoints), "a first checkpoint", 300, 0.5)
        victim_index = max(ready)  # not the leader: it hosts rank 0 (the checkpoint writer)
        pods = {_index(p): p for p in job_pods(kube, stack.namespace, stack.job.name)
                if (p.get("status") or {}).get("phase") == "Running"}
        victim = pods[victim_index]
        shrink_round = max(r.number for _, r, _ in ready.values() if r is not None)
        killed_at = time.time()
        killed = lose_node(stack.nodes, stack.record, victim)
        try:
            on_disk = checkpoint_steps(stack.checkpoints)
            report(f"elastic-shrink: {killed.what} on {killed.node}; "
                   f"newest checkpoint on disk: {on_disk[-1] if on_disk else None}")
            smaller = _training_at(stack, kube, high - 1, shrink_round, report,
                                   "elastic-shrink")

            def operator_shrunk() -> float | None:
                size = (job_status(kube, stack.namespace, stack.job.name).get("elastic")
                        or {}).get("worldSize")
                return time.time() - killed_at if size == high - 1 else None

            operator = _wait(operator_shrunk, "the operator to record the smaller size", 180,
                             0.5)
            shrink = _result("elastic-shrink", killed.node, killed.what,
                             killed_at, high, high - 1, smaller,
                             _last_before(stack, smaller, shrink_round),
                             on_disk[-1] if on_disk else None, operator)
            report(f"elastic-shrink: {shrink.row()}")
        finally:
            if killed.undo is not None:
                killed.undo()
        grow_round = max(r.number for _, r, _ in smaller.values() if r is not None)
        _wait(lambda: _node_ready(kube, killed.node), f"{killed.node} to be Ready again", 180,
              0.5)
        unfence_nodes(stack.kubeconfig, [killed.node])
        returned_at = time.time()
        report(f"elastic-grow: {killed.node} Ready and unfenced")
        larger = _training_at(stack, kube, high, grow_round, report, "elastic-grow")
        grow = _result("elastic-grow", killed.node, "kubelet resumed, fence lifted",
                       returned_at, high - 1, high, larger,
                       _last_before(stack, larger, grow_round),
                       _on_demand(stack, [name for name, _, _ in larger.values()]))
        report(f"elastic-grow: {grow.row()}")
        return [shrink, grow]


def _last_before(stack: RealStack, ready: dict[int, tuple[str, RoundLog | None, int]],
                 round_: int) -> int:
    """The last step logged in rounds up to `round_` (before the grow) by any rank."""
    best = 0
    for name, _, _ in ready.values():
        log = pod_log(stack.nodes, stack.namespace, name)
        if log is None:
            continue
        current = 0
        for line in log.lines:
            m = ROUND.search(line.text)
            if m:
                current = int(m.group(1))
            elif current <= round_ and (s := STEP.match(line.text)):
                best = max(best, int(s.group(2)))
    return best


ON_DEMAND = re.compile(r"^rank 0 checkpoint \S+ step (\d+) \(on demand\)$")


def _on_demand(stack: RealStack, pods: list[str]) -> int | None:
    """The step of the last checkpoint rank 0 (whichever pod holds it) wrote because its
    launcher asked for it."""
    steps = []
    for pod in pods:
        log = pod_log(stack.nodes, stack.namespace, pod)
        steps += [(ln.time, int(m.group(1))) for ln in (log.lines if log else [])
                  if (m := ON_DEMAND.match(ln.text))]
    return max(steps)[1] if steps else None


def _node_ready(kube: SyncKube, name: str) -> bool:
    node = kube.get(api_path("v1", "nodes", name=name))
    return any(c.get("type") == NODE_READY and c.get("status") == "True"
               for c in (node.get("status") or {}).get("conditions") or [])

