"""The README's main job: a local cluster from an example stack with trainmaster on it, and
a real training job that survives a real kill.

1. start the local control plane for the spec's topology with its first N nodes real
   (kubelet + containerd + runc), build (cached) and load the trainmaster image, and deploy
   the committed stack `demo` with `trainmaster pulumi up` (the real Pulumi engine and
   Kubernetes provider): trainmaster-scheduler and the operator run as pods on a real node
   under their own ServiceAccounts (trainmaster.drill);
2. wait until the real training job (the stack's job that runs the trainmaster image, e.g.
   examples/data-parallel) trains on the real nodes, placed by the in-cluster scheduler;
   the GPU jobs stay on kwok's simulated nodes;
3. kill one rank's training process on the host (SIGKILL, found through its container's
   cgroup), and measure from the ranks' logs and the checkpoint files how the operator
   brought the gang back: the step it resumed at and the steps lost.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

from trainmaster.drill import (
    DrillResult,
    RealStack,
    pods_table,
    run_drill,
    serve_demo_datasets,
    start_real_stack,
    wait_controllers,
    wait_training,
)
from trainmaster.kubeclient import SyncKube

Report = Callable[[str], None]
DEMO_REAL_NODES = 2
DEMO_SCENARIO = "process-kill"
DEMO_STACK = "demo"


@dataclass(frozen=True)
class DemoResult:
    stack: RealStack
    pods_before: str
    """The pods once the job trains (`kubectl get pods -o wide` plus ServiceAccounts)."""
    drill: DrillResult
    pods_after: str


def run_demo(spec_path: Path, report: Report, real_nodes: int = DEMO_REAL_NODES,
             pulumi_stack: str | None = None, monitoring: bool = True) -> DemoResult:
    # With the monitoring stack (unless --no-monitoring): its targets and the restart alert
    # are shown by `trainmaster cluster monitoring`.
    stack = start_real_stack(spec_path, real_nodes, report, pulumi_stack, monitoring)
    serve_demo_datasets(stack.record, stack.spec, report)  # the stack's s3:// datasets
    wait_controllers(stack, report)
    with SyncKube.connect(stack.kubeconfig) as kube:
        wait_training(stack, kube, report)
    namespaces = [f"{stack.namespace}-system", stack.namespace]
    before = pods_table(stack.kubeconfig, namespaces)
    drill = run_drill(stack, DEMO_SCENARIO, report)
    return DemoResult(stack, before, drill, pods_table(stack.kubeconfig, namespaces))
