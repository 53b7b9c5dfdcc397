"""`trainmaster demo`: the README's main job (see trainmaster.demo)."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path
from typing import Annotated

import typer

from trainmaster.cli._app import app


@app.command()
def demo(
    spec: Annotated[Path, typer.Option("--spec", help="Example stack to run.")] = Path(
        "stacks/dev/cluster.yaml"
    ),
) -> None:
    """Start a local cluster from a stack, run trainmaster-scheduler and the operator on it,
    and show a job recovering from a pod failure from its last checkpoint."""
    from rich.console import Console

    from trainmaster.cli._tools import build_with_progress
    from trainmaster.demo import run_demo
    from trainmaster.toolchain import CLUSTER_FAMILIES

    err = Console(stderr=True, soft_wrap=True)
    build_with_progress(list(CLUSTER_FAMILIES))
    with err.status("starting") as status:
        record, shown = run_demo(spec, lambda step: status.update(step))
    err.print(
        f"[bold green]recovered[/]: {shown.job} lost pod {shown.failed_pod}; the operator "
        f"restarted its whole gang in {shown.seconds:.1f}s (restart {shown.restarts}), "
        f"resuming from {shown.resumed_from}"
    )
    # The resource view, as an operator of the platform would look at it.
    subprocess.run(
        [sys.executable, "-m", "trainmaster", "status", "--kubeconfig", record.kubeconfig],
        check=False,
    )
    err.print("The cluster, trainmaster-scheduler and the operator keep running:")
    err.print(f"  export KUBECONFIG={record.kubeconfig}")
    err.print("  trainmaster status            # jobs, GPUs per leaf, fenced nodes, gangs")
    err.print("  trainmaster cluster down      # stop everything")
