"""`trainmaster drill nic-down`: a rail interface of a real node taken down under a training
job, and what the agent, the operator, the gang and the alerting do about it."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Annotated

import typer

from trainmaster.cli._app import app
from trainmaster.cli._console import lazy_console
from trainmaster.errors import TrainmasterError

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
