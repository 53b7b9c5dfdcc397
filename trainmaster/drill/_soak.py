"""The soak: a training job on the real nodes under one fault every S seconds for M
minutes, in turn a worker kill, a container kill, a node loss and a NIC down (the faults
of trainmaster/drill/_faults.py), and its ETTR (trainmaster/drill/_ettr.py) from the
ranks' own log lines, which are read all along (a restarted gang's old pods take their log
files with them).

The node loss is `lose_node`, the elastic drills' own: the node's kubelet stopped and the
victim pod's containers killed, as by a power cut. A rigid job's other ranks then lose
their peer and the operator restarts the gang elsewhere (on a pod failure, or once the
node is NotReady); an elastic job's survivors re-rendezvous at the smaller size. Either
way a new run of rank 0 logs a step, which is what the soak waits for before it undoes
the fault (the kubelet resumed: the node back Ready, its deleted pod cleaned up).

The next fault waits until the job trains again after the last one, and, after a node
loss or a NIC down, until the node is back (kubelet resumed and Ready, or the link up and
NICHealthy=True) and unfenced, and then until the gang has all its pods running again (an
elastic gang has grown back); a fault so delayed is injected as soon as that is done.
A fault still pending when the soak's minutes are up is waited for after them (its
recovery timed; the ETTR's window stays the minutes). A soak that could not inject every
fault it announced (held back by slow recoveries) is not ok.
"""

from __future__ import annotations

import time
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

from trainmaster.api import NIC_CONDITION, NODE_READY
from trainmaster.cluster import ClusterError
from trainmaster.drill._ettr import Accounting, Fault, Mark, account, progress_marks, split_runs
from trainmaster.drill._faults import (
    Killed,
    kill_container,
    kill_process,
    lose_node,
    take_rail_down,
)
from trainmaster.drill._logs import LogLine, pod_log
from trainmaster.drill._stack import RealStack, Report, job_pods, job_status
from trainmaster.kubeclient import SyncKube, node_path
from trainmaster.operator import unfence_nodes

Inject = Callable[[list[Any], Any, dict[str, Any]], Killed]
FAULTS: tuple[tuple[str, Inject, str], ...] = (
    ("worker-kill", kill_process, ""),
    ("container-kill", kill_container, ""),
    ("node-loss", lose_node, NODE_READY),
    ("nic-down", take_rail_down, NIC_CONDITION),
)
"""Each fault, what injects it and, if it takes a node away, the node condition that says
it is back once the fault is undone."""
FAULT_KINDS = tuple(kind for kind, _, _ in FAULTS)


def faults_in(minutes: float, fault_every: float) -> int:
    """Faults a soak injects on schedule: at S, 2S, … before its end."""
    return max(0, int((minutes * 60 - 1e-9) // fault_every))


class _Logs:
    """Every log line the job's pods have written, kept after their pods are gone."""

    def __init__(self, stack: RealStack) -> None:
        self.stack = stack
        self.seen: dict[tuple[float, str], LogLine] = {}

    def read(self, kube: SyncKube) -> list[Mark]:
        for pod in job_pods(kube, self.stack.namespace, self.stack.job.name):
            found = pod_log(self.stack.nodes, self.stack.namespace, pod["metadata"]["name"])
            for line in found.lines if found else []:
                self.seen[(line.time, line.text)] = line
        return progress_marks(self.seen.values())


@dataclass
class _Pending:
    """A fault not yet behind us: the job must train again, the node come back."""

    fault: Fault
    killed: Killed
    back_condition: str
    undone: bool = False


@dataclass(frozen=True)
class SoakResult:
    job: str
    launcher: str
    minutes: float
    fault_every: float
    accounting: Accounting
    nodes: tuple[str, ...]
    marks: tuple[Mark, ...] = field(repr=False)
    """Rank 0's step lines and run starts, for a plot."""
    faults_due: int = 0
    """The faults the soak announced (`faults_in`); fewer injected is a failed soak."""

    @property
    def ok(self) -> bool:
        acc = self.accounting
        return (0 < acc.ettr <= 1 and acc.monotone and len(acc.faults) >= self.faults_due
                and all(c.recover_seconds is not None for c in acc.faults))

    def row(self) -> dict[str, Any]:
        acc = self.accounting
        return {"job": self.job, "launcher": self.launcher, "minutes": self.minutes,
                "fault_every_seconds": self.fault_every,
                "wall_seconds": round(acc.wall_seconds, 1),
                "productive_seconds": round(acc.productive_seconds, 1),
                "ettr": round(acc.ettr, 4), "steps_counted": acc.steps_counted,
                "last_step": acc.last_step, "runs": acc.runs, "monotone": acc.monotone,
                "faults_due": self.faults_due, "faults": [c.row() for c in acc.faults],
                "ok": self.ok}


def _training_pods(kube: SyncKube, stack: RealStack) -> list[dict[str, Any]]:
    """The current attempt's pods, if all of them run on real nodes."""
    attempt = int(job_status(kube, stack.namespace, stack.job.name).get("attempt", 0))
    return whole_gang(job_pods(kube, stack.namespace, stack.job.name, attempt),
                      stack.record.real_nodes, stack.job.nodes)


def whole_gang(pods: list[dict[str, Any]], real_nodes: list[str], size: int
               ) -> list[dict[str, Any]]:
    """`pods` that run on real nodes and are not being deleted, if there are `size` of
    them, else none. A lost node's pod stays Running and Terminating until its kubelet
    answers: it is no target for the next fault (its containers are dead), and its
    elastic gang is whole only once the Job's replacement runs."""
    running = [p for p in pods if (p.get("status") or {}).get("phase") == "Running"
               and not p["metadata"].get("deletionTimestamp")
               and p["spec"].get("nodeName") in real_nodes]
    return running if len(running) == size else []


def _restarted_since(marks: list[Mark], since: float) -> bool:
    """A run started after `since` has logged a step. Not merely a step after it: with a
    stopped kubelet the old gang trains on until the operator replaces it."""
    return any(start > since for start, _ in split_runs(marks))


def _condition(kube: SyncKube, node: str, kind: str) -> str:
    for c in (kube.get(node_path(node)).get("status") or {}).get("conditions") or []:
        if c.get("type") == kind:
            return str(c.get("status"))
    return ""


def _settle(kube: SyncKube, stack: RealStack, pending: _Pending, marks: list[Mark],
            report: Report) -> bool:
    """One look at a pending fault; True once it is behind us."""
    fault = pending.fault
    if not _restarted_since(marks, fault.at):
        return False
    if not pending.back_condition:
        return True
    if not pending.undone:
        if pending.killed.undo is not None:
            pending.killed.undo()
        pending.undone = True
        report(f"{fault.kind}: training again; {fault.node} put back (the fault undone)")
    if _condition(kube, fault.node, pending.back_condition) != "True":
        return False
    lifted = unfence_nodes(stack.kubeconfig, [fault.node])
    report(f"{fault.kind}: {fault.node} {pending.back_condition}=True"
           f"{', unfenced' if lifted.get(fault.node) else ''}")
    return True


def _progress(acc: Accounting, end: float, injected: int, due: int, state: str) -> str:
    """The soak so far (`acc` accounts up to now) as one line."""
    elapsed, total = acc.end - acc.start, end - acc.start
    return (f"soak {elapsed / 60:5.1f} of {total / 60:.1f} min: step {acc.last_step}, "
            f"fault {injected} of {due}, {state}, ETTR so far "
            f"{acc.productive_seconds / max(elapsed, 1e-9):.1%}")


def run_soak(stack: RealStack, minutes: float, fault_every: float, report: Report,
             timeout: float = 600, every: float = 1.0, report_every: float = 15.0
             ) -> SoakResult:
    """The module docstring's soak on a stack whose job trains (or is about to)."""
    logs = _Logs(stack)
    due = faults_in(minutes, fault_every)
    with SyncKube.connect(stack.kubeconfig) as kube:
        _wait_first_steps(kube, stack, logs, report, timeout)
        start = time.time()
        end = start + minutes * 60
        faults: list[Fault] = []
        pending: _Pending | None = None
        reported = start
        report(f"soak: {minutes:g} min, a fault every {fault_every:g}s ({due} faults: "
               f"{', '.join(FAULT_KINDS)} in turn)")
        while (now := time.time()) < end:
            marks = logs.read(kube)
            if pending is not None:
                if _settle(kube, stack, pending, marks, report):
                    pending = None
                elif now - pending.fault.at > timeout:
                    # Put the node back and go on: the report shows the fault's cost.
                    report(f"{pending.fault.kind}: no restart within {timeout:.0f}s; "
                           "undoing the fault")
                    _put_back(stack, pending)
                    pending = None
            if pending is None and len(faults) < due and now >= start + (len(faults) + 1) \
                    * fault_every:
                pods = _training_pods(kube, stack)
                if pods:
                    pending = _inject(stack, pods, len(faults), report)
                    faults.append(pending.fault)
            if now - reported >= report_every:
                reported = now
                state = "recovering" if pending is not None else "training"
                report(_progress(account(marks, faults, start, now), end, len(faults), due,
                                 state))
            time.sleep(every)
        marks = logs.read(kube)
        # The window is over; a fault still pending is waited for, to time its recovery.
        while pending is not None:
            if _settle(kube, stack, pending, marks, report):
                pending = None
            elif time.time() - pending.fault.at > timeout:
                report(f"{pending.fault.kind}: no restart within {timeout:.0f}s")
                _put_back(stack, pending)
                pending = None
            else:
                time.sleep(every)
                marks = logs.read(kube)
    accounting = account(marks, faults, start, end)
    if len(faults) < due:  # held back by slow recoveries: say so, the soak fails on it
        report(f"soak: only {len(faults)} of the {due} faults injected within "
               f"{minutes:g} min")
    return SoakResult(stack.job.name, stack.job.launcher, minutes, fault_every, accounting,
                      tuple(stack.record.real_nodes), tuple(marks), due)


def _put_back(stack: RealStack, pending: _Pending) -> None:
    """Undo the fault now, and lift the node's fence if it takes a node away."""
    if not pending.undone and pending.killed.undo is not None:
        pending.killed.undo()
        pending.undone = True
    if pending.back_condition:
        unfence_nodes(stack.kubeconfig, [pending.fault.node])


def _wait_first_steps(kube: SyncKube, stack: RealStack, logs: _Logs, report: Report,
                      timeout: float) -> None:
    deadline = time.time() + timeout * 2  # a cold first start loads the image's torch
    while time.time() < deadline:
        marks = logs.read(kube)
        steps = [m for m in marks if m.step is not None]
        if _training_pods(kube, stack) and len(steps) >= 2:
            report(f"{stack.job.name}: training, rank 0 at step {steps[-1].step}")
            return
        report(f"{stack.job.name}: waiting for it to train on the real nodes "
               f"({len(steps)} steps logged)")
        time.sleep(3)
    raise ClusterError(f"{stack.job.name} did not train on the real nodes within "
                       f"{timeout * 2:.0f}s")


def _inject(stack: RealStack, pods: list[dict[str, Any]], index: int, report: Report
            ) -> _Pending:
    kind, inject, back = FAULTS[index % len(FAULTS)]
    victim = max(pods, key=lambda p: p["metadata"]["name"])  # not the first: its rendezvous
    at = time.time()
    killed = inject(stack.nodes, stack.record, victim)
    report(f"{kind}: {killed.what} of {killed.pod} on {killed.node}")
    return _Pending(Fault(kind, at, killed.node, killed.what), killed, back)
