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
   brought the gang back: the step it resumed at and the steps lost;
4. with the monitoring stack (the default; `--no-monitoring` leaves it out): wait for the
   kill's TrainingGangRestarted alert to fire in Prometheus and reach Alertmanager.

When the real job runs under torchrun (stacks/demo's `lm`: examples/transformer in the
torch image), step 3 kills one worker process instead and measures torchrun restarting
the workers in place (trainmaster.drill._inplace): no gang restart, so no restart alert.
Either way the demo reads where each dataset is warm (every node a reader may use, its
state label, the warm-up pods still Pending: trainmaster.drill._warmups).
"""

from __future__ import annotations

import time
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from trainmaster.datacache import CheckpointStore
from trainmaster.drill import (
    DatasetNodes,
    DrillResult,
    InPlaceResult,
    InterfaceBytes,
    NodeInterfaceBytes,
    RealStack,
    logged_step,
    node_storage_traffic,
    pods_table,
    rank_traffic,
    run_drill,
    run_worker_kill,
    serve_demo_datasets,
    served_mirror,
    spec_real_images,
    stack_datasets,
    start_real_stack,
    wait_controllers,
    wait_torch_training,
    wait_training,
)
from trainmaster.kubeclient import SyncKube
from trainmaster.s3server import S3Server

Report = Callable[[str], None]
DEMO_REAL_NODES = 3
"""Two for the gang, one for it to move to when a node is fenced (docs/real-nodes.md)."""
DEMO_SCENARIO = "process-kill"
DEMO_STACK = "demo"


RESTART_ALERT = "TrainingGangRestarted"


@dataclass(frozen=True)
class AlertSeen:
    """The kill seen by the monitoring stack: seconds from the kill to the restart alert
    firing in Prometheus, and to Alertmanager holding it."""

    alert: str
    firing_seconds: float
    received_seconds: float


@dataclass(frozen=True)
class MirrorSeen:
    """The job's complete checkpoints on the S3 server its mirror names."""

    url: str
    steps: tuple[int, ...]
    """Newest first."""
    sizes: tuple[int, ...]
    """Bytes of each, in the same order."""


@dataclass(frozen=True)
class DemoResult:
    stack: RealStack
    pods_before: str
    """The pods once the job trains (`kubectl get pods -o wide` plus ServiceAccounts)."""
    drill: DrillResult | None
    """A `python` job's kill and the operator's gang restart."""
    pods_after: str
    alert: AlertSeen | None = None
    """With the monitoring stack: when the kill's alert fired."""
    traffic: tuple[str, int, tuple[InterfaceBytes, ...]] = ("", 0, ())
    """One rank's pod, its step, and its bytes per interface, read before the kill."""
    inplace: InPlaceResult | None = None
    """A torchrun job's worker kill and torchrun's restart in place."""
    datasets: tuple[DatasetNodes, ...] = ()
    """Where each dataset a job reads is warm, once the job trains."""
    storage: tuple[NodeInterfaceBytes, ...] = ()
    """Each real node's storage interface, read with `traffic`: the warm-ups' S3 reads and
    the checkpoint mirrors' uploads."""
    mirror: MirrorSeen | None = None
    """A job with jobs[].checkpoint.mirror: its checkpoints on the S3 server, read with
    `traffic` (the mirror sidecars' uploads are in the rank's storage-network bytes)."""

    @property
    def ok(self) -> bool:
        recovered = (self.inplace.ok if self.inplace is not None
                     else self.drill is not None and self.drill.ok)
        return recovered and all(d.ready for d in self.datasets)


def wait_job_scraped(stack: RealStack, report: Report, timeout: float = 240) -> int:
    """Wait until Prometheus holds the job's gang attempt from its launchers: the restart
    alert compares the attempts seen in its window, so a rank killed before its first
    scrape (the targets appear a reload after the pods) would leave nothing to compare.
    Returns the number of series seen."""
    from trainmaster.cluster import ClusterError, endpoints
    from trainmaster.polling import wait_until

    expr = (f'trainmaster_job_attempt{{namespace="{stack.namespace}",'
            f'trainingjob="{stack.job.name}"}}')

    def series() -> int:
        try:  # Prometheus' pod may still be starting: ask again until the timeout
            api = endpoints(stack.kubeconfig, stack.spec.monitoring.scrape_namespace)
            return len(api.query(expr))
        except ClusterError:
            return 0

    report(f"waiting for Prometheus to scrape {stack.job.name}'s launchers")
    seen: int = wait_until(series, timeout=timeout, every=2, what=f"{expr} in Prometheus")
    return seen


def wait_restart_alert(stack: RealStack, killed_at: float, report: Report,
                       timeout: float = 180) -> AlertSeen:
    """Wait for the job's TrainingGangRestarted in Prometheus (firing), then in
    Alertmanager; seconds from the kill to each."""
    from trainmaster.cluster import endpoints
    from trainmaster.polling import wait_until

    api = endpoints(stack.kubeconfig, stack.spec.monitoring.scrape_namespace)
    job = stack.job.name

    def mine(labels: dict[str, str]) -> bool:
        return labels.get("alertname") == RESTART_ALERT and labels.get("trainingjob") == job

    report(f"waiting for {RESTART_ALERT} of {job} to fire (Prometheus, then Alertmanager)")
    fired: float = wait_until(
        lambda: time.time() if any(mine(a["labels"]) and a["state"] == "firing"
                                   for a in api.alerts()) else None,
        timeout=timeout, every=1, what=f"{RESTART_ALERT} to fire")
    received: float = wait_until(
        lambda: time.time() if any(mine(a["labels"]) for a in api.received()) else None,
        timeout=timeout, every=1, what=f"{RESTART_ALERT} to reach Alertmanager")
    return AlertSeen(RESTART_ALERT, fired - killed_at, received - killed_at)


def wait_datasets(stack: RealStack, report: Report, timeout: float = 180
                  ) -> tuple[DatasetNodes, ...]:
    """Each dataset's nodes once all are ready, or as they are at the timeout (the demo
    then says which are not)."""
    with SyncKube.connect(stack.kubeconfig) as kube:
        deadline = time.monotonic() + timeout
        while True:
            found = tuple(stack_datasets(kube, stack.spec))
            for d in found:
                report(d.lines()[0])
            if all(d.ready for d in found) or time.monotonic() > deadline:
                return found
            time.sleep(2)


def run_demo(spec_path: Path, report: Report, real_nodes: int = DEMO_REAL_NODES,
             pulumi_stack: str | None = None, monitoring: bool = True) -> DemoResult:
    # With the monitoring stack (unless --no-monitoring): its targets and the restart alert
    # are shown by `trainmaster cluster monitoring`.
    stack = start_real_stack(spec_path, real_nodes, report, pulumi_stack, monitoring,
                             job_images=spec_real_images(spec_path))
    # The stack's s3:// datasets, and its jobs' checkpoint mirrors on the same server.
    server = serve_demo_datasets(stack.record, stack.spec, report)
    wait_controllers(stack, report)
    namespaces = [f"{stack.namespace}-system", stack.namespace]
    if stack.job.launcher == "torchrun":
        # The torch job: a worker killed, torchrun restarts the workers in place.
        with SyncKube.connect(stack.kubeconfig) as kube:
            _, pods = wait_torch_training(stack, kube, report, min_step=1, timeout=1200)
        datasets = wait_datasets(stack, report)
        before = pods_table(stack.kubeconfig, namespaces)
        inplace = run_worker_kill(stack, report)
        after = pods_table(stack.kubeconfig, namespaces)
        # Read after the recovery (the same pods, so their counters run on): by then the
        # mirror has uploaded checkpoints, which the storage network's bytes then show.
        mirror = wait_mirrored(stack, server, report) if server is not None else None
        traffic = torch_pod_traffic(stack, pods)
        storage = tuple(node_storage_traffic(stack.nodes))
        return DemoResult(stack, before, None, after, traffic=traffic, inplace=inplace,
                          datasets=datasets, storage=storage, mirror=mirror)
    with SyncKube.connect(stack.kubeconfig) as kube:
        wait_training(stack, kube, report)
    datasets = wait_datasets(stack, report)
    before = pods_table(stack.kubeconfig, namespaces)
    if monitoring:
        wait_job_scraped(stack, report)
    traffic = rank_zero_traffic(stack, report)
    storage = tuple(node_storage_traffic(stack.nodes))
    drill = run_drill(stack, DEMO_SCENARIO, report)
    after = pods_table(stack.kubeconfig, namespaces)
    alert = wait_restart_alert(stack, drill.killed_at, report) if monitoring else None
    return DemoResult(stack, before, drill, after, alert, traffic, datasets=datasets,
                      storage=storage)


def wait_mirrored(stack: RealStack, server: S3Server, report: Report, at_least: int = 2,
                  timeout: float = 180) -> MirrorSeen | None:
    """The job's mirrored checkpoints once `at_least` are there (each gang pod uploads
    every one, so by then the older ones have gone through every pod's storage network),
    or as they are at the timeout. None when the job mirrors nothing to this server."""
    mirror = served_mirror(stack.spec, stack.job)
    if mirror is None:
        return None
    store = CheckpointStore(mirror.url, server.client())
    report(f"waiting for {at_least} checkpoints of {stack.job.name} in {mirror.url}")
    deadline = time.monotonic() + timeout
    while True:
        found = store.mirrored()
        if len(found) >= at_least or time.monotonic() > deadline:
            return MirrorSeen(mirror.url, tuple(m.step for m in found),
                              tuple(m.size for m in found))
        time.sleep(2)


def rank_zero_traffic(stack: RealStack, report: Report
                      ) -> tuple[str, int, tuple[InterfaceBytes, ...]]:
    """Rank 0's bytes per interface (it serves the all-reduce), and the step it is at."""
    from trainmaster.drill import pod_log

    with SyncKube.connect(stack.kubeconfig) as kube:
        _, pods = wait_training(stack, kube, report)
    from trainmaster.api import COMPLETION_INDEX_ANNOTATION

    rank0 = min(pods, key=lambda p: int((p["metadata"].get("annotations") or {}).get(
        COMPLETION_INDEX_ANNOTATION, "0")))
    name = rank0["metadata"]["name"]
    log = pod_log(stack.nodes, stack.namespace, name)
    step = (log.last_step() or 0) if log else 0
    return name, step, tuple(rank_traffic(stack.nodes, rank0))


def torch_pod_traffic(stack: RealStack, pods: list[dict[str, Any]]
                      ) -> tuple[str, int, tuple[InterfaceBytes, ...]]:
    """The first pod's bytes per interface and the step the job's logs have reached (under
    torchrun the ranks are the rendezvous', so any pod carries its share of the ring)."""
    pod = min(pods, key=lambda p: str(p["metadata"]["name"]))
    step = logged_step(stack, pods)
    return pod["metadata"]["name"], step, tuple(rank_traffic(stack.nodes, pod))
