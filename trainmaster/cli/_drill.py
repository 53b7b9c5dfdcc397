"""`trainmaster drill nic-down`: a rail interface of a real node taken down under a training
job, and what the agent, the operator, the gang and the alerting do about it.
`trainmaster drill soak`: every fault in turn under a training job for minutes, and its
ETTR (trainmaster/drill/_soak.py)."""

from __future__ import annotations

import json
from collections.abc import Callable
from pathlib import Path
from typing import TYPE_CHECKING, Annotated

import typer

from trainmaster.cli._app import app
from trainmaster.cli._console import lazy_console
from trainmaster.errors import TrainmasterError

if TYPE_CHECKING:
    from trainmaster.drill import SoakResult

drill_app = typer.Typer(help="Real faults on a local cluster's real nodes.",
                        no_args_is_help=True)
app.add_typer(drill_app, name="drill")

_out = lazy_console()
_err = lazy_console(stderr=True, soft_wrap=True)

REAL_NODES = 3
"""A gang of two whole-node pods moves off the fenced node only if two others are free."""


class DrillError(TrainmasterError):
    """The drill could not run or did not finish."""


@drill_app.command("nic-down")
def nic_down_cmd(
    spec: Annotated[Path, typer.Option(
        "--spec", help="The stack whose CPU job is drilled (started with 3 real nodes and "
        "the monitoring stack, unless its cluster runs already).")] = Path(
        "stacks/dev/cluster.yaml"),
    timeout: Annotated[float, typer.Option(help="Seconds each step may take.")] = 300,
    as_json: Annotated[bool, typer.Option("--json", help="Print only the JSON row.")] = False,
) -> None:
    """Take a rail of a rank's node down and time the recovery.

    One rail interface of a node running a rank goes down (`ip link set DEV down`): times
    the NIC agent's NICHealthy=False, the operator's fence, the gang training again from
    its checkpoint on the other real nodes and the NIC alert in Prometheus and
    Alertmanager; then set the link up, wait for NICHealthy=True and lift the (sticky)
    fence with `operator unfence`. Needs root; stops the cluster if it started it."""
    from trainmaster.cli._tools import build_with_progress
    from trainmaster.cluster import ClusterError, down_state_dir
    from trainmaster.drill import (
        run_nic_down,
        start_real_stack,
        wait_controllers,
        wait_prometheus,
    )
    from trainmaster.toolchain import CLUSTER_FAMILIES, MONITORING_STACK_FAMILIES, NODE_FAMILIES

    if not spec.is_file():
        raise typer.BadParameter(f"{spec} does not exist", param_hint="--spec")
    build_with_progress([*CLUSTER_FAMILIES, *NODE_FAMILIES, *MONITORING_STACK_FAMILIES],
                        why="the drill's real nodes")

    def report(line: str) -> None:
        _err.print(line, highlight=False)

    try:
        stack = start_real_stack(spec, REAL_NODES, report, monitoring=True)
    except ClusterError as exc:
        raise DrillError(str(exc)) from None
    try:
        if len(stack.record.real_nodes) < REAL_NODES:
            raise DrillError(
                f"cluster {stack.record.name} runs {len(stack.record.real_nodes)} real nodes; "
                f"the drill needs {REAL_NODES}: stop it with `trainmaster cluster down`")
        wait_controllers(stack, report)
        result = run_nic_down(stack, report, wait_prometheus(stack), timeout)
    except ClusterError as exc:
        raise DrillError(str(exc)) from None
    finally:
        if stack.started:
            down_state_dir(stack.state_dir)
    if as_json:
        print(json.dumps(result.row()))
        return
    drill = result.drill
    sticky = ("stayed fenced until `operator unfence`" if result.fenced_after_clear
              else "was unfenced by itself")
    lines = [
        f"{drill.killed.what} on {drill.killed.node} (rank pod {drill.killed.pod})",
        f"  NICHealthy=False after {result.detect_seconds:.1f}s: {result.condition_message}",
        f"  fenced (cordoned, tainted) after {result.fence_seconds:.1f}s",
        f"  the operator restarted the gang after {drill.detect_seconds:.1f}s; every rank "
        f"trained again {drill.recover_seconds:.1f}s after the link went down, on "
        f"{', '.join(drill.nodes_after)}",
        f"  resumed at step {drill.resumed_step} (newest checkpoint on disk: "
        f"{drill.last_checkpoint_step}; steps lost: {drill.lost_steps})",
        f"  NodeNICUnhealthy firing after {_secs(result.alert_seconds)}, in Alertmanager "
        f"after {_secs(result.alertmanager_seconds)}",
        f"  link up: NICHealthy=True after {result.cleared_seconds:.1f}s; the node {sticky}; "
        f"{'schedulable' if result.schedulable_after_unfence else 'NOT schedulable'} after it",
    ]
    for line in lines:
        _out.print(line, highlight=False, markup=False)
    if not result.ok:
        raise DrillError(f"the drill did not go as expected: {json.dumps(result.row())}")


def _secs(value: float | None) -> str:
    return "-" if value is None else f"{value:.1f}s"


SOAK_REAL_NODES = 3
"""A gang of two whole-node pods trains on after a node loss only if a third is free."""


@drill_app.command("soak")
def soak_cmd(
    minutes: Annotated[float, typer.Option(
        "--minutes", help="How long the soak runs (its wall time).")] = 30,
    fault_every: Annotated[float, typer.Option(
        "--fault-every", help="Seconds between two faults.")] = 180,
    spec: Annotated[Path, typer.Option(
        "--spec", help="The stack whose real job is soaked: stacks/dev (the numpy job) or "
        "stacks/demo (the torch job lm, in the torch image).")] = Path(
        "stacks/dev/cluster.yaml"),
    plot: Annotated[Path | None, typer.Option(
        "--plot", help="Also write a PNG of step against wall time, faults marked.")] = None,
    timeout: Annotated[float, typer.Option(
        help="Seconds a fault may take to be behind us.")] = 600,
    elastic: Annotated[bool, typer.Option(
        "--elastic", help="Make the torchrun job elastic, one pod below its size to its "
        "size: a lost member costs a re-rendezvous, not a gang restart.")] = False,
    as_json: Annotated[bool, typer.Option("--json", help="Print only the JSON row.")] = False,
) -> None:
    """Inject faults in turn for minutes; report the ETTR.

    On three real nodes the stack's real job trains while a worker kill,
    a container kill, a node loss (kubelet stopped and the pod's
    containers killed, then the kubelet resumed) and a NIC down
    (rail 0's link down, then up) come in turn, one every
    --fault-every seconds. Reports the effective training time ratio
    (ETTR, docs/real-nodes.md) and per fault the time to training again
    and the steps lost. Exits 1 if a fault was not injected or not
    recovered. Needs root; stops the cluster it starts."""
    from trainmaster.cli._tools import build_with_progress
    from trainmaster.cluster import ClusterError, down_state_dir
    from trainmaster.drill import faults_in, soak_spec
    from trainmaster.toolchain import CLUSTER_FAMILIES, NODE_FAMILIES

    if minutes <= 0:
        raise typer.BadParameter(f"{minutes:g}: give a positive number of minutes",
                                 param_hint="--minutes")
    if fault_every <= 0 or faults_in(minutes, fault_every) < 1:
        raise typer.BadParameter(
            f"{fault_every:g}: give a positive number of seconds below the soak's "
            f"{minutes * 60:g}s, so that at least one fault falls in it",
            param_hint="--fault-every")
    if not spec.is_file():
        raise typer.BadParameter(f"{spec} does not exist", param_hint="--spec")
    if plot is not None and plot.suffix.lower() != ".png":
        raise typer.BadParameter(f"{plot}: name a .png file", param_hint="--plot")
    build_with_progress([*CLUSTER_FAMILIES, *NODE_FAMILIES], why="the soak's real nodes")

    def report(line: str) -> None:
        _err.print(line, highlight=False, markup=False)

    import tempfile

    with tempfile.TemporaryDirectory(prefix="trainmaster-soak-") as folder:
        try:
            placed = soak_spec(spec, Path(folder), faults_in(minutes, fault_every),
                               elastic)
            result = _soak(placed, minutes, fault_every, timeout, report, down_state_dir)
        except ClusterError as exc:
            raise DrillError(str(exc)) from None
    if plot is not None:
        from trainmaster.drill import plot_soak

        plot_soak(result, plot)
        report(f"wrote {plot}")
    if as_json:
        print(json.dumps(result.row()))
    else:
        _print_soak(result)
    if not result.ok:
        raise DrillError(f"the soak did not go as expected: {json.dumps(result.row())}")


def _soak(placed: Path, minutes: float, fault_every: float, timeout: float,
          report: Callable[[str], None], down: Callable[[Path], object]) -> SoakResult:
    from trainmaster.drill import (
        run_soak,
        serve_demo_datasets,
        spec_real_images,
        start_real_stack,
        wait_controllers,
    )

    stack = start_real_stack(placed, SOAK_REAL_NODES, report,
                             job_images=spec_real_images(placed))
    try:
        if len(stack.record.real_nodes) < SOAK_REAL_NODES:
            raise DrillError(
                f"cluster {stack.record.name} runs {len(stack.record.real_nodes)} real "
                f"nodes; the soak needs {SOAK_REAL_NODES}: stop it with `trainmaster "
                "cluster down`")
        serve_demo_datasets(stack.record, stack.spec, report)  # the torch job's dataset
        wait_controllers(stack, report)
        return run_soak(stack, minutes, fault_every, report, timeout)
    finally:
        if stack.started:
            down(stack.state_dir)


def _print_soak(result: SoakResult) -> None:
    from rich.table import Table  # rich: only when printing

    acc = result.accounting
    _out.print(f"{result.job} ({result.launcher}) on {', '.join(result.nodes)}: "
               f"{acc.wall_seconds / 60:.1f} min, a fault every {result.fault_every:g}s",
               highlight=False, markup=False)
    _out.print(f"ETTR {acc.ettr:.1%}: {acc.productive_seconds:.0f}s of productive steps in "
               f"{acc.wall_seconds:.0f}s ({acc.steps_counted} steps counted, last step "
               f"{acc.last_step}, {acc.runs} restarts)", highlight=False, markup=False)
    table = Table(title=f"faults: {len(acc.faults)} of {result.faults_due} injected")
    for column in ("#", "fault", "node", "training again s", "steps lost", "resumed at"):
        table.add_column(column, justify="left" if column in ("fault", "node") else "right",
                         no_wrap=True)
    for i, cost in enumerate(acc.faults, 1):
        again = "-" if cost.recover_seconds is None else f"{cost.recover_seconds:.1f}"
        resumed = "-" if cost.resumed_step is None else str(cost.resumed_step)
        table.add_row(str(i), cost.fault.kind, cost.fault.node, again, str(cost.steps_lost),
                      resumed)
    _out.print(table)
