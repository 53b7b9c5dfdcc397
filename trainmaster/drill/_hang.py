"""The `hang` drill: a rank that stops making progress without dying (SIGSTOP to its
training process), and the time until Prometheus fires the stalled-job alert
(`TrainingNoProgress`) for its job. Nothing restarts a stopped process by itself, so this
drill measures detection only, and resumes the process (SIGCONT) at the end.

Needs the monitoring stack (`cluster up --monitoring`), whose Prometheus is read from
this host on its pod IP.
"""

from __future__ import annotations

import time
from dataclasses import dataclass

from trainmaster.cluster import Endpoints
from trainmaster.drill._drill import _index, wait_training
from trainmaster.drill._faults import Killed, hang_process
from trainmaster.drill._stack import RealStack, Report
from trainmaster.kubeclient import SyncKube
from trainmaster.polling import wait_until

STALLED_ALERT = "TrainingNoProgress"


@dataclass(frozen=True)
class HangResult:
    stopped: Killed
    stopped_at: float
    fired_seconds: float
    """From the SIGSTOP to the alert firing (Prometheus' view, polled every second)."""
    threshold_seconds: int
    """The rule's `noProgressMinutes`, in seconds: the least fired_seconds can be."""


def run_hang(stack: RealStack, api: Endpoints, report: Report, timeout: float = 600
             ) -> HangResult:
    job = stack.job.name
    threshold = stack.spec.monitoring.alerts.no_progress_minutes * 60
    with SyncKube.connect(stack.kubeconfig) as kube:
        _, pods = wait_training(stack, kube, report)
    victim = max(pods, key=_index)
    stopped_at = time.time()
    stopped = hang_process(stack.nodes, stack.record, victim)
    report(f"stopped {stopped.what} of {stopped.pod} on {stopped.node}; waiting for "
           f"{STALLED_ALERT} (threshold {threshold}s)")
    try:
        def firing() -> float | None:
            for alert in api.alerts():
                labels = alert["labels"]
                if (labels["alertname"], labels.get("trainingjob"), alert["state"]) == (
                        STALLED_ALERT, job, "firing"):
                    return time.time()
            return None

        fired = wait_until(firing, timeout=threshold + timeout, every=1,
                           what=f"{STALLED_ALERT} to fire for {job}")
    finally:
        assert stopped.undo is not None
        stopped.undo()
    return HangResult(stopped, stopped_at, fired - stopped_at, threshold)
