"""The `nic-down` drill: one rail interface of a node running a rank of the gang goes down
for real (`ip link set … down`), and everything that follows is timed from it:

    detect_seconds   the NIC agent, reading the interface, sets NICHealthy=False naming it
    fence_seconds    the operator has cordoned and tainted the node
    (the DrillResult) the gang restarted and training again from its checkpoint on the
                     other real nodes, as for every drill (trainmaster/drill/_drill.py)
    alert_seconds    the NIC alert fires in Prometheus, and reaches Alertmanager
                     (alertmanager_seconds); only with the monitoring stack

Then the link comes back up: `cleared_seconds` until NICHealthy=True. Fencing is sticky
(docs/operator.md, "Fencing"): the node stays cordoned and tainted although its NIC is
healthy again, until someone lifts the fence; the drill does what a person would, once the
link is repaired: `trainmaster operator unfence NODE`, and checks the node is schedulable.
"""

from __future__ import annotations

import time
from dataclasses import dataclass, field
from typing import Any

from trainmaster.api import NIC_CONDITION, UNHEALTHY_TAINT
from trainmaster.cluster import ClusterError, Endpoints
from trainmaster.drill._drill import DrillResult, run_drill
from trainmaster.drill._faults import Killed
from trainmaster.drill._stack import RealStack, Report, _wait
from trainmaster.kubeclient import SyncKube, node_path
from trainmaster.operator import unfence_nodes

NIC_ALERT = "NodeNICUnhealthy"
SCENARIO = "nic-down"


@dataclass
class _Seen:
    """First times (seconds after the link went down) the drill saw each step."""

    detect: float | None = None
    message: str = ""
    fence: float | None = None
    times: dict[str, float] = field(default_factory=dict)


@dataclass(frozen=True)
class NicDownResult:
    drill: DrillResult
    interface: str
    detect_seconds: float
    condition_message: str
    fence_seconds: float
    alert_seconds: float | None
    """The link down -> the NIC alert firing in Prometheus (None: no monitoring stack)."""
    alertmanager_seconds: float | None
    cleared_seconds: float
    """The link up -> NICHealthy=True again."""
    fenced_after_clear: bool
    """Still fenced once NICHealthy was True again (fencing is sticky)."""
    schedulable_after_unfence: bool

    @property
    def ok(self) -> bool:
        return (self.drill.ok and self.interface in self.condition_message
                and self.detect_seconds <= self.fence_seconds
                and self.fenced_after_clear and self.schedulable_after_unfence)

    def row(self) -> dict[str, Any]:
        row = self.drill.row()
        row.update({
            "interface": self.interface,
            "nic_detect_seconds": round(self.detect_seconds, 2),
            "fence_seconds": round(self.fence_seconds, 2),
            "alert_seconds": _round(self.alert_seconds),
            "alertmanager_seconds": _round(self.alertmanager_seconds),
            "cleared_seconds": round(self.cleared_seconds, 2),
            "ok": self.ok,
        })
        return row


def _round(value: float | None) -> float | None:
    return None if value is None else round(value, 1)


def _condition(node: dict[str, Any]) -> dict[str, Any]:
    for condition in (node.get("status") or {}).get("conditions") or []:
        if condition.get("type") == NIC_CONDITION:
            return dict(condition)
    return {}


def _fenced(node: dict[str, Any]) -> bool:
    spec = node.get("spec") or {}
    return bool(spec.get("unschedulable")) and any(
        t.get("key") == UNHEALTHY_TAINT for t in spec.get("taints") or [])


def run_nic_down(stack: RealStack, report: Report, api: Endpoints | None = None,
                 timeout: float = 300, after_checkpoint: int = 0) -> NicDownResult:
    seen = _Seen()

    def watch(kube: SyncKube, killed: Killed, at: float) -> None:
        if seen.detect is not None and seen.fence is not None:
            return
        node = kube.get(node_path(killed.node))
        condition = _condition(node)
        interface = killed.device
        if (seen.detect is None and condition.get("status") == "False" and interface
                and interface in condition.get("message", "")):
            seen.detect, seen.message = time.time() - at, str(condition.get("message"))
            report(f"{SCENARIO}: {killed.node} {NIC_CONDITION}=False after "
                   f"{seen.detect:.1f}s: {seen.message}")
        if seen.fence is None and _fenced(node):
            seen.fence = time.time() - at
            report(f"{SCENARIO}: {killed.node} fenced after {seen.fence:.1f}s")

    def hold(kube: SyncKube, result: DrillResult) -> None:
        """Until the detection and the fence were seen, and the alert fired (the link
        stays down meanwhile: the rule's `for` needs it down a minute)."""
        def both() -> bool:
            watch(kube, result.killed, result.killed_at)
            return seen.detect is not None and seen.fence is not None

        _wait(both, f"{NIC_CONDITION}=False and the fence of {result.killed.node}", timeout)
        if api is not None:
            seen.times.update(_alert_times(api, result, report, timeout))

    drill = run_drill(stack, SCENARIO, report, timeout, after_checkpoint, watch, hold)
    assert seen.detect is not None and seen.fence is not None
    interface = drill.killed.device
    return _after_link_up(stack, drill, interface, seen, report, timeout)


def _alert_times(api: Endpoints, result: DrillResult, report: Report, timeout: float
                 ) -> dict[str, float]:
    node = result.killed.node

    def ours(alert: dict[str, Any]) -> bool:
        labels = alert["labels"]
        return bool(labels["alertname"] == NIC_ALERT and labels.get("node") == node)

    def firing() -> float | None:
        if any(ours(a) and a["state"] == "firing" for a in api.alerts()):
            return time.time()
        return None

    def received() -> float | None:
        return time.time() if any(ours(a) for a in api.received()) else None

    # The rule's `for: 1m` comes on top of the agent's look, a scrape and an evaluation.
    fired = _wait(firing, f"{NIC_ALERT} to fire for {node}", timeout + 120, 1)
    report(f"{SCENARIO}: {NIC_ALERT} firing for {node} {fired - result.killed_at:.1f}s "
           "after the link went down")
    reached = _wait(received, f"{NIC_ALERT} to reach Alertmanager", 120, 1)
    report(f"{SCENARIO}: {NIC_ALERT} in Alertmanager "
           f"{reached - result.killed_at:.1f}s after the link went down")
    return {"alert": fired - result.killed_at, "alertmanager": reached - result.killed_at}


def _after_link_up(stack: RealStack, drill: DrillResult, interface: str, seen: _Seen,
                   report: Report, timeout: float) -> NicDownResult:
    """run_drill has set the link up again (the fault's undo): the condition clears, the
    fence stays until lifted, and lifting it makes the node schedulable."""
    up_at = time.time()
    name = drill.killed.node
    with SyncKube.connect(stack.kubeconfig) as kube:
        healthy = _wait(lambda: _condition(n := kube.get(node_path(name))).get("status")
                        == "True" and n, f"{NIC_CONDITION}=True on {name} after the link "
                        "came up", timeout, 0.5)
        cleared = time.time() - up_at
        still_fenced = _fenced(healthy)
        report(f"{SCENARIO}: link up; {NIC_CONDITION}=True after {cleared:.1f}s; the node "
               f"{'stays fenced (sticky)' if still_fenced else 'is no longer fenced'}")
        lifted = unfence_nodes(stack.kubeconfig, [name])
        if not lifted.get(name):
            raise ClusterError(f"`trainmaster operator unfence {name}` lifted nothing")
        after = kube.get(node_path(name))
        schedulable = not _fenced(after) and not (after.get("spec") or {}).get("unschedulable")
        report(f"{SCENARIO}: `trainmaster operator unfence {name}`: "
               f"{'schedulable again' if schedulable else 'still not schedulable'}")
    assert seen.detect is not None and seen.fence is not None
    return NicDownResult(drill, interface, seen.detect, seen.message, seen.fence,
                         seen.times.get("alert"), seen.times.get("alertmanager"), cleared,
                         still_fenced, schedulable)
