"""`trainmaster apply`: server-side apply a spec's objects (a local shortcut to Pulumi)."""

from __future__ import annotations

from pathlib import Path
from typing import Annotated

import typer

from trainmaster.cli._app import ClusterOpt, ContextOpt, KubeconfigOpt, app, say_target
from trainmaster.errors import UsageError

DRY_RUN = ("none", "server")


@app.command()
def apply(
    spec: Annotated[Path, typer.Argument(metavar="SPEC",
                                         help="Cluster spec file ('-': standard input).")],
    dry_run: Annotated[
        str,
        typer.Option("--dry-run", metavar="[none|server]",
                     help="server: the API server checks and admits every object and "
                     "stores nothing (as kubectl apply --dry-run=server)."),
    ] = "none",
    kubeconfig: KubeconfigOpt = None,
    context: ContextOpt = None,
    cluster_name: ClusterOpt = None,
) -> None:
    """Apply every object of a spec with server-side apply (field manager `trainmaster`).

    An object whose change reaches an immutable field (a PriorityClass's value or
    preemptionPolicy, a selector, a roleRef...) is replaced: deleted, then created. Anything
    else the API server would refuse stops the apply before any object is written."""
    if dry_run == "client":
        raise UsageError("--dry-run=client: `trainmaster render SPEC` prints the objects "
                         "without a server")
    if dry_run not in DRY_RUN:
        raise UsageError(f"--dry-run must be one of {', '.join(DRY_RUN)}, not {dry_run!r}")
    say_target(kubeconfig, "apply")
    from rich.console import Console

    from trainmaster.apply import apply_spec
    from trainmaster.cli._input import read_spec

    err = Console(stderr=True, highlight=False, soft_wrap=True)  # a line per message
    cluster = read_spec(spec)
    server = dry_run == "server"
    if err.is_terminal:
        with err.status("checking" if server else "applying") as status:
            def report(step: str) -> None:
                # A replacement deletes an object: it stays on screen, the rest is progress.
                if step.startswith(("replacing ", "would replace ")):
                    err.print(step)
                status.update(step)

            applied = apply_spec(kubeconfig, cluster, report, server)
    else:  # a log: one plain line per object
        applied = apply_spec(kubeconfig, cluster, err.print, server)
    if server:
        err.print(f"server dry run: {len(applied)} objects of {cluster.metadata.name} "
                  "would be applied; nothing was stored")
    else:
        err.print(f"applied {len(applied)} objects of {cluster.metadata.name}")
