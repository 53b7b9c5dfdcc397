"""The elastic drill for a torchrun job (examples/transformer, the torch image) on real
nodes: the job, elastic (`--nnodes=MIN:MAX`), loses one node and torchrun's own agents
re-rendezvous at the smaller world size and train on from the newest complete DCP
checkpoint; the node returns, the Job's replacement pod joins the rendezvous and the gang
grows back.

The fault is the one of the CPU job's drill and of the soak (`lose_node`,
trainmaster.drill._faults): the victim node's kubelet stopped and its pod's containers
killed through containerd. Everything is
read from the pods' CRI log lines (stamped by the runtime) and the checkpoint folder; the
survivor's lines give the profile of the shrink, each in seconds after the fault:

    noticed_seconds      torchrun's agent logs its worker group failed (the worker's
                         all-reduce with the dead peer failed)
    rendezvous_seconds   the agent logs the new round's rendezvous complete
    workers_seconds      the new workers log their rank and world size
    loaded_seconds       rank 0 logs the checkpoint it resumed from
    recover_seconds      rank 0 logs the new round's first step

(the agent's lines need LOGLEVEL=INFO in the job's env, which `make_torch_elastic` sets).
"""

from __future__ import annotations

import re
import time
from dataclasses import dataclass, field
from typing import Any

from trainmaster.api import NODE_READY
from trainmaster.cluster import ClusterError
from trainmaster.drill._faults import lose_node
from trainmaster.drill._logs import LogLine, checkpoint_steps, pod_log
from trainmaster.drill._stack import RealStack, Report, _wait, job_pods, job_status
from trainmaster.kubeclient import SyncKube, api_path
from trainmaster.operator import unfence_nodes

TORCH_ELASTIC_DATA = "/opt/trainmaster/examples"
"""The text the drill's job trains on: the examples in the image (no dataset to serve)."""
WORKER = re.compile(r"^rank (\d+) of (\d+): pid \d+, torchrun restart (\d+)")
RESUMED = re.compile(r"^rank 0: resumed from (\S+) at step (\d+) \(world size (\d+)\)")
STEP = re.compile(r"^step (\d+) loss ")
NOTICED = re.compile(r"Worker group (FAILED|UNHEALTHY)|failed \(exitcode")
RENDEZVOUS = re.compile(r"Rendezvous complete for workers")


def make_torch_elastic(doc: dict[str, Any], image: str, low: int, high: int,
                       name: str = "lm-elastic") -> dict[str, Any]:
    """The spec document with a torchrun job `name` (examples/transformer in `image`),
    elastic from `low` to `high` pods (at `high`), training on the examples' text."""
    job = {
        "name": name, "image": image, "launcher": "torchrun", "nodes": high,
        "elastic": {"minNodes": low, "maxNodes": high},
        "gpusPerPod": 8,  # whole nodes (policy multi-node-whole-nodes); CPU workers only
        "cpuPerPod": 1, "memoryPerPod": "2Gi",
        "command": ["python", "/opt/trainmaster/examples/transformer/train.py"],
        "hyperParameters": {"trainSteps": 100000, "checkpointEvery": 10,
                            "dataDir": TORCH_ELASTIC_DATA},
        "arguments": {"hyperParameter": "--{name} {value}"},
        # LOGLEVEL: torchrun's agent logs its failures and rendezvous (the drill's profile).
        "env": {"NPROC_PER_NODE": "1", "LOGLEVEL": "INFO"},
        "checkpoint": {"volume": "checkpoints", "path": f"/checkpoints/{name}",
                       "intervalMinutes": 1, "keep": 3},
        "restartPolicy": {"maxRestarts": 5, "backoffSeconds": 5, "retryableExitCodes": "any"},
        "queue": "default",
    }
    doc["jobs"] = [*(doc.get("jobs") or []), job]
    return doc


@dataclass(frozen=True)
class TorchRound:
    """One pod's newest worker round: world size, when its worker started, its lines."""

    pod: str
    rank: int
    world: int
    started: float
    lines: list[LogLine]

    def first_step(self) -> tuple[float, int] | None:
        for line in self.lines:
            if m := STEP.match(line.text):
                return line.time, int(m.group(1))
        return None

    def resumed(self) -> tuple[float, int] | None:
        for line in self.lines:
            if m := RESUMED.match(line.text):
                return line.time, int(m.group(2))
        return None


def newest_round(pod: str, lines: list[LogLine]) -> TorchRound | None:
    start = None
    for i, line in enumerate(lines):
        if WORKER.match(line.text):
            start = i
    if start is None:
        return None
    m = WORKER.match(lines[start].text)
    assert m is not None
    return TorchRound(pod, int(m.group(1)), int(m.group(2)), lines[start].time,
                      lines[start:])


def _first(lines: list[LogLine], pattern: re.Pattern[str], after: float) -> float | None:
    return next((ln.time for ln in lines if ln.time > after and pattern.search(ln.text)),
                None)


@dataclass(frozen=True)
class TorchElasticResult:
    scenario: str
    node: str
    what: str
    world_size_before: int
    world_size_after: int
    recover_seconds: float
    """The fault (or the node's return) -> rank 0's first step at the new world size."""
    checkpoint_at_fault: int | None
    resumed_step: int
    checkpoint_at_resume: int | None
    """The newest complete checkpoint on disk when the resume was first seen."""
    last_step_before: int
    steps_after: int
    profile: dict[str, float | None] = field(default_factory=dict)
    operator_seconds: float | None = None

    @property
    def lost_steps(self) -> int:
        return self.last_step_before - self.resumed_step

    @property
    def ok(self) -> bool:
        # It resumed from a complete checkpoint at least as new as the one on disk at the
        # fault, and no newer than any on disk when it resumed; then it trained on.
        return (self.checkpoint_at_fault is not None
                and self.checkpoint_at_fault <= self.resumed_step
                and (self.checkpoint_at_resume is None
                     or self.resumed_step <= self.checkpoint_at_resume)
                and self.steps_after > self.resumed_step
                and self.world_size_after == self.world_size_before
                + (1 if self.scenario == "elastic-grow" else -1))

    def row(self) -> dict[str, Any]:
        return {
            "scenario": self.scenario, "job": "torch",
            "recover_seconds": round(self.recover_seconds, 2),
            **{k: None if v is None else round(v, 2) for k, v in self.profile.items()},
            "checkpoint_at_start": self.checkpoint_at_fault,
            "resumed_step": self.resumed_step, "lost_steps": self.lost_steps,
            "world_size_before": self.world_size_before,
            "world_size_after": self.world_size_after,
            "operator_seconds": None if self.operator_seconds is None
            else round(self.operator_seconds, 2),
            "ok": self.ok,
        }


Rounds = dict[str, tuple[list[LogLine], TorchRound | None]]


def _rounds(stack: RealStack, kube: SyncKube) -> Rounds:
    """pod name -> (its log lines, its newest worker round) for the job's Running pods."""
    out: Rounds = {}
    for pod in job_pods(kube, stack.namespace, stack.job.name):
        if (pod.get("status") or {}).get("phase") != "Running":
            continue
        name = pod["metadata"]["name"]
        log = pod_log(stack.nodes, stack.namespace, name)
        lines = log.lines if log else []
        out[name] = (lines, newest_round(name, lines))
    return out


@dataclass
class _Watch:
    """Waits for the gang to train at `world` in rounds started after `since`; notes the
    newest checkpoint on disk the first time rank 0's resume line is seen."""

    stack: RealStack
    world: int
    since: float
    checkpoint_at_resume: int | None = None
    resume_seen: bool = False

    def __call__(self, kube: SyncKube, report: Report, what: str) -> Rounds:
        def check() -> Rounds | None:
            rounds = _rounds(self.stack, kube)
            split = split_worlds(rounds)
            if split:
                raise ClusterError(f"{self.stack.job.name} runs {split}: separate worlds "
                                   "(torchrun's rendezvous split the gang)")
            fresh = {n: r for n, r in rounds.items() if r[1] is not None
                     and r[1].world == self.world and r[1].started > self.since}
            lead = [r for _, r in fresh.values() if r is not None and r.rank == 0]
            if lead and lead[0].resumed() is not None and not self.resume_seen:
                on_disk = checkpoint_steps(self.stack.checkpoints)
                self.resume_seen = True
                self.checkpoint_at_resume = on_disk[-1] if on_disk else None
            stepping = bool(lead) and lead[0].first_step() is not None
            report(f"{what}: {len(fresh)} of {self.world} pods in a round at world size "
                   f"{self.world}, rank 0 {'stepping' if stepping else 'not stepping yet'}")
            return rounds if len(fresh) == self.world and stepping else None

        found: Rounds = _wait(check, f"{self.stack.job.name} to train at world size "
                              f"{self.world}", 600, 0.5)
        return found


def split_worlds(rounds: Rounds) -> str:
    """Pods whose newest rounds each have a rank 0 of the same world size: one gang in
    several worlds (e.g. a node declared dead by the rendezvous while it trained)."""
    leads: dict[int, list[str]] = {}
    for name, (_, r) in sorted(rounds.items()):
        if r is not None and r.rank == 0:
            leads.setdefault(r.world, []).append(name)
    return "; ".join(f"a rank 0 of {world} on each of {', '.join(pods)}"
                     for world, pods in leads.items() if len(pods) > 1)


def _lead(rounds: Rounds, world: int, since: float) -> tuple[list[LogLine], TorchRound]:
    for lines, r in rounds.values():
        if r is not None and r.rank == 0 and r.world == world and r.started > since:
            return lines, r
    raise ClusterError(f"no rank 0 at world size {world} in the pods' logs")


def _last_step_before(rounds: Rounds, until: float) -> int:
    return max((int(m.group(1)) for lines, _ in rounds.values() for ln in lines
                if ln.time < until and (m := STEP.match(ln.text))), default=0)


def _result(scenario: str, node: str, what: str, since: float, before: int, after: int,
            rounds: Rounds, at_fault: int | None, watch: _Watch,
            operator: float | None = None) -> TorchElasticResult:
    lines, lead = _lead(rounds, after, since)
    first = lead.first_step()
    resumed = lead.resumed()
    assert first is not None

    def ago(t: float | None) -> float | None:
        return None if t is None else t - since

    profile = {"noticed_seconds": ago(_first(lines, NOTICED, since)),
               "rendezvous_seconds": ago(_first(lines, RENDEZVOUS, since)),
               "workers_seconds": lead.started - since,
               "loaded_seconds": ago(resumed[0] if resumed else None)}
    return TorchElasticResult(
        scenario, node, what, before, after, recover_seconds=first[0] - since,
        checkpoint_at_fault=at_fault, resumed_step=resumed[1] if resumed else 0,
        checkpoint_at_resume=watch.checkpoint_at_resume,
        last_step_before=_last_step_before(rounds, lead.started),
        steps_after=max(int(m.group(1)) for ln in lead.lines if (m := STEP.match(ln.text))),
        profile=profile, operator_seconds=operator)


def run_torch_elastic_drill(stack: RealStack, report: Report) -> list[TorchElasticResult]:
    """Shrink on a lost node, then grow when it returns; one result each."""
    job = stack.job
    if job.elastic is None or job.launcher != "torchrun":
        raise ClusterError(f"{job.name} is not an elastic torchrun job: see "
                           "make_torch_elastic")
    high = job.elastic.max_nodes
    with SyncKube.connect(stack.kubeconfig) as kube:
        ready = _Watch(stack, high, 0)(kube, report, "before the fault")
        _wait(lambda: checkpoint_steps(stack.checkpoints), "a first checkpoint", 600, 0.5)
        pods = {p["metadata"]["name"]: p for p in job_pods(kube, stack.namespace, job.name)
                if (p.get("status") or {}).get("phase") == "Running"}
        # Not rank 0's pod: it writes the checkpoint's marker; and not the store's host
        # (the lowest index), whose loss the loopback test covers (the launcher elects
        # again and starts torchrun anew, slower).
        victim = max((p for n, p in pods.items()
                      if (r := ready[n][1]) is not None and r.rank != 0),
                     key=lambda p: p["metadata"]["name"])
        on_disk = checkpoint_steps(stack.checkpoints)
        killed_at = time.time()
        killed = lose_node(stack.nodes, stack.record, victim)
        try:
            report(f"elastic-shrink: {killed.what} on {killed.node}; "
                   f"newest checkpoint on disk: {on_disk[-1] if on_disk else None}")
            watch = _Watch(stack, high - 1, killed_at)
            smaller = watch(kube, report, "elastic-shrink")

            def operator_shrunk() -> float | None:
                size = (job_status(kube, stack.namespace, job.name).get("elastic")
                        or {}).get("worldSize")
                return time.time() - killed_at if size == high - 1 else None

            try:
                operator: float | None = _wait(
                    operator_shrunk, "the operator to record the smaller size", 180, 0.5)
            except ClusterError as exc:  # the ranks' figures stand without it; say so
                report(f"elastic-shrink: {exc}")
                operator = None
            shrink = _result("elastic-shrink", killed.node, killed.what,
                             killed_at, high, high - 1, smaller,
                             on_disk[-1] if on_disk else None, watch, operator)
            report(f"elastic-shrink: {shrink.row()}")
        finally:
            if killed.undo is not None:
                killed.undo()
        _wait(lambda: _node_ready(kube, killed.node), f"{killed.node} to be Ready again", 180,
              0.5)
        unfence_nodes(stack.kubeconfig, [killed.node])
        on_disk = checkpoint_steps(stack.checkpoints)
        returned_at = time.time()
        report(f"elastic-grow: {killed.node} Ready and unfenced")
        watch = _Watch(stack, high, returned_at)
        larger = watch(kube, report, "elastic-grow")
        grow = _result("elastic-grow", killed.node, "kubelet resumed, fence lifted",
                       returned_at, high - 1, high, larger,
                       on_disk[-1] if on_disk else None, watch)
        report(f"elastic-grow: {grow.row()}")
        return [shrink, grow]


def _node_ready(kube: SyncKube, name: str) -> bool:
    node = kube.get(api_path("v1", "nodes", name=name))
    return any(c.get("type") == NODE_READY and c.get("status") == "True"
               for c in (node.get("status") or {}).get("conditions") or [])
