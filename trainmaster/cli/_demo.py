"""`trainmaster demo`: the README's main job (see trainmaster.demo)."""

from __future__ import annotations

import threading
import time
from collections.abc import Callable
from pathlib import Path
from typing import TYPE_CHECKING, Annotated, Any

import typer

from trainmaster.api import DATASET_LABEL_PREFIX, JOB_LABEL
from trainmaster.cli._app import app

if TYPE_CHECKING:
    from trainmaster.drill import DrillResult, InPlaceResult


@app.command()
def demo(
    stack: Annotated[str, typer.Option(
        "--stack", help="Pulumi stack to deploy with `trainmaster pulumi up` (its config in "
        "stacks/ names the spec, which places trainmaster on the real nodes).")] = "demo",
    spec: Annotated[Path | None, typer.Option(
        "--spec", help="Instead of a Pulumi stack: a spec, placed on the real nodes in "
        "memory and server-side applied (no Pulumi).")] = None,
    real_nodes: Annotated[int, typer.Option(
        "--real-nodes", help="Run the spec's first N nodes as real nodes (kubelet + "
        "containerd + runc on this host; needs root).")] = 3,
    monitoring: Annotated[bool, typer.Option(
        "--monitoring/--no-monitoring", help="Also run the Prometheus operator, Prometheus "
        "and Alertmanager on the real nodes (`cluster up --monitoring`; docs/monitoring.md) "
        "and show the kill's alert firing. On by default; a cold set-up then also builds "
        "the prometheus-operator, prometheus and alertmanager tools.")
    ] = True,
) -> None:
    """Start a local cluster from a stack with real nodes, deploy trainmaster on it as pods,
    train the stack's real job on the real nodes (stacks/demo: the PyTorch transformer under
    torchrun), kill one worker and show it resuming from its last checkpoint."""
    from rich.console import Console

    from trainmaster.cli._tools import build_with_progress
    from trainmaster.cluster import ClusterError
    from trainmaster.demo import run_demo
    from trainmaster.drill import (
        build_stack_images,
        pulumi_stack_spec,
        source_root,
        spec_real_images,
    )
    from trainmaster.toolchain import (
        CLUSTER_FAMILIES,
        MONITORING_STACK_FAMILIES,
        NODE_FAMILIES,
        POLICY_FAMILIES,
        PULUMI_FAMILIES,
    )

    if real_nodes < 1:
        raise typer.BadParameter("the demo trains on real nodes: give 1 or more",
                                 param_hint="--real-nodes")
    err = Console(stderr=True, soft_wrap=True)
    out = Console(soft_wrap=True)
    started = time.monotonic()
    pulumi_stack = None if spec is not None else stack
    try:
        if spec is None:
            spec = pulumi_stack_spec(source_root(), stack)
    except ClusterError as exc:
        raise typer.BadParameter(str(exc), param_hint="--stack") from None
    # The images (the torch layer takes minutes cold) build beside the Go tools.
    err.print("building the images beside the tools (each cached by its inputs)",
              highlight=False)
    images_done = _beside(lambda: build_stack_images(spec, spec_real_images(spec),
                                                     lambda _: None))
    # kube-router too: the demo's NetworkPolicies are enforced on its real nodes.
    build_with_progress([*CLUSTER_FAMILIES, *NODE_FAMILIES, *POLICY_FAMILIES,
                         *(MONITORING_STACK_FAMILIES if monitoring else ()),
                         *(PULUMI_FAMILIES if pulumi_stack is not None else ())],
                        why="`trainmaster demo`")
    failed = images_done()
    if failed:  # the demo builds them again below, and reports the error in its place
        err.print(f"building the images beside the tools failed: {failed}", highlight=False)
    try:
        if err.is_terminal:
            with err.status("starting") as status:
                result = run_demo(spec, lambda step: status.update(step), real_nodes,
                                  pulumi_stack, monitoring)
        else:
            result = run_demo(spec, _Lines(err).report, real_nodes, pulumi_stack, monitoring)
    except ClusterError as exc:
        err.print(f"[bold red]error:[/] {exc}")
        err.print("`trainmaster cluster down` stops what was started.")
        raise typer.Exit(1) from None
    real = result.stack
    out.print(f"Deployed by {real.deployed}")
    out.print(f"Pods while {real.job.name} trains (kubectl get pods -o wide):")
    out.print(result.pods_before, highlight=False)
    out.print()
    for line in traffic_lines(result.traffic):
        out.print(line, highlight=False, markup=False)
    out.print()
    if result.mirror is not None:
        for line in mirror_lines(real.job.name, result.mirror):
            out.print(line, highlight=False, markup=False)
        out.print()
    if result.storage:
        for line in storage_lines(result.storage):
            out.print(line, highlight=False, markup=False)
        out.print()
    if result.datasets:
        out.print("Datasets in the node-local cache "
                  f"(node label {DATASET_LABEL_PREFIX}<name>):")
        for dataset in result.datasets:
            for line in dataset.lines():
                out.print(line, highlight=False)
        out.print()
    if result.inplace is not None:
        _print_inplace(out, result.inplace, real.checkpoints)
    elif result.drill is not None:
        _print_gang_restart(out, result.drill, real.checkpoints)
    out.print()
    out.print(result.pods_after, highlight=False)
    if result.alert is not None:
        a = result.alert
        out.print(f"  {a.alert} fired in Prometheus {a.firing_seconds:.1f}s after the kill, "
                  f"reached Alertmanager at {a.received_seconds:.1f}s")
    if result.inplace is not None:
        verdict = ("[bold green]restarted in place by torchrun and resumed at its "
                   "checkpointed step[/]" if result.inplace.ok else
                   "[bold red]was NOT restarted in place at its last checkpoint[/]")
    else:
        verdict = ("[bold green]resumed at its checkpointed step[/]"
                   if result.drill is not None and result.drill.ok else
                   "[bold red]did NOT resume at its last checkpoint[/]")
    if not all(d.ready for d in result.datasets):
        verdict += " [bold red](a dataset is not ready on every node its readers may use)[/]"
    err.print(f"{real.job.name}: {verdict} ({time.monotonic() - started:.0f}s in all)")
    err.print("The cluster and the job keep running:")
    err.print(f"  export KUBECONFIG={real.kubeconfig}")
    err.print(f"  kubectl get pods -A -o wide; kubectl logs -n {real.namespace} "
              f"-l {JOB_LABEL}={real.job.name}")
    for line in next_commands(monitoring):
        err.print(line, highlight=False)
    if not result.ok:
        raise typer.Exit(1)


def _loss_line(losses: tuple[tuple[int, float], ...]) -> str:
    """Rank 0's loss at a few steps: the first, every tenth part of the way, the last."""
    if not losses:
        return "none logged"
    picks = sorted({0, len(losses) - 1, *range(0, len(losses), max(1, len(losses) // 8))})
    return ", ".join(f"step {losses[i][0]} {losses[i][1]:.3f}" for i in picks)


def _print_inplace(out: Any, run: InPlaceResult, checkpoints: Path) -> None:
    out.print(f"Loss before the kill (rank 0): {_loss_line(run.losses_before)}",
              highlight=False)
    out.print(f"Killed {run.killed.what} of {run.killed.pod} on {run.killed.node}.",
              highlight=False)
    if run.in_place:
        out.print(f"  torchrun restarted the workers in place: the same pods, attempt "
                  f"{run.attempt}, no container restarted (torchrun restart "
                  f"{run.torchrun_restart})")
    else:
        out.print(f"  NOT in place: attempt {run.attempt} -> {run.attempt_after}, "
                  f"{run.container_restarts} container restarts (torchrun gave up; the "
                  "operator restarted the gang)")
    out.print(f"  newest checkpoint on disk at the kill: step {run.checkpoint_at_kill}, when "
              f"the workers resumed: step {run.checkpoint_at_resume} ({checkpoints})")
    out.print(f"  resumed at step {run.resumed_step} (\"resumed from {run.resumed_from} at "
              f"step {run.resumed_step}\")", highlight=False)
    out.print(f"  steps lost: {run.lost_steps} (last step logged before the restart: "
              f"{run.last_step_before})")
    out.print(f"  training again {run.recover_seconds:.1f}s after the kill")
    out.print(f"Loss after the restart (rank 0): {_loss_line(run.losses_after)}",
              highlight=False)


def _print_gang_restart(out: Any, drill: DrillResult, checkpoints: Path) -> None:
    out.print(f"Killed {drill.killed.what} of {drill.killed.pod} on {drill.killed.node}.")
    out.print(f"  the operator restarted the gang after {drill.detect_seconds:.1f}s "
              f"(attempt {drill.attempt} -> a new one)")
    out.print(f"  newest checkpoint on disk when the gang died: step "
              f"{drill.last_checkpoint_step} ({checkpoints})")
    out.print(f"  resumed at step {drill.resumed_step} (rank 0: \"resumed from "
              f"{drill.resumed_from} at step {drill.resumed_step}\")")
    out.print(f"  steps lost: {drill.lost_steps} (last step logged before the kill: "
              f"{drill.last_step_before})")
    out.print(f"  every rank trained again {drill.recover_seconds:.1f}s after the kill")


def _beside(work: Callable[[], object]) -> Callable[[], str | None]:
    """Run `work` in a thread (a cold demo builds the Go tools meanwhile, which hides most
    of the torch layer's minutes). Returns a wait that gives its error, if any: the demo
    then builds again in its place and reports it there. Wait before building the same
    images again."""
    failed: list[str] = []

    def run() -> None:
        try:
            work()
        except Exception as exc:
            failed.append(str(exc))

    worker = threading.Thread(target=run, name="images-beside-the-tools", daemon=True)
    worker.start()

    def wait() -> str | None:
        worker.join()
        return failed[0] if failed else None

    return wait
def traffic_lines(traffic: tuple[str, int, tuple[Any, ...]]) -> list[str]:
    """One rank's bytes per interface (trainmaster.drill.rank_traffic), one line each."""
    pod, step, counts = traffic
    lines = [f"Bytes through each interface of one rank ({pod}) since its pod started, at "
             f"step {step} (/proc/<pid>/net/dev in its network namespace):"]
    for c in counts:
        where = c.network or "-"
        lines.append(f"  {c.interface:<9} {where:<36} {','.join(c.addresses):<15} "
                     f"rx {c.rx:>11,} B  tx {c.tx:>11,} B")
    return lines


def mirror_lines(job: str, mirror: Any) -> list[str]:
    """The job's checkpoints on the S3 server (trainmaster.demo.MirrorSeen), newest first."""
    lines = [f"Checkpoints of {job} mirrored to {mirror.url} over the storage network: "
             f"{len(mirror.steps)} complete"]
    lines += [f"  step {step:<8} {size:>13,} B" for step, size in
              zip(mirror.steps, mirror.sizes, strict=True)]
    return lines


def storage_lines(counts: tuple[Any, ...]) -> list[str]:
    """Each real node's storage interface (trainmaster.drill.node_storage_traffic)."""
    # Host side (/sys/class/net/<if>/statistics): a finished warm-up's namespace is gone.
    lines = ["Bytes through each real node's storage interface since `cluster up` "
             "(the warm-ups' S3 reads, the checkpoint mirrors' uploads):"]
    for c in counts:
        lines.append(f"  {c.node:<15} {c.interface:<11} rx {c.rx:>11,} B  tx {c.tx:>11,} B")
    return lines


def next_commands(monitoring: bool) -> list[str]:
    """What the demo prints last: the commands that show the running cluster (the
    README and docs/monitoring.md quote them)."""
    lines = [
        "  trainmaster status              # jobs (with Prometheus: live steps/s), GPUs per "
        "leaf, fenced nodes, gangs",
        "  trainmaster ui                  # live web view: http://127.0.0.1:8080/",
    ]
    if monitoring:
        lines.append("  trainmaster cluster monitoring  # Prometheus' scrape targets, the "
                     "alerts and the alert history (Prometheus ALERTS, Alertmanager)")
    lines.append("  trainmaster cluster down        # stop everything")
    return lines


class _Lines:
    """Progress for a log (no terminal): a line when the topic changes, else every 15 s."""

    def __init__(self, console: Any) -> None:
        self.console = console
        self.topic = ""
        self.shown = 0.0

    def report(self, line: str) -> None:
        topic = line.split(":", 1)[0]
        if topic != self.topic or time.monotonic() - self.shown > 15:
            self.console.print(line, highlight=False)
            self.topic, self.shown = topic, time.monotonic()
