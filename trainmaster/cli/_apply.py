"""`trainmaster apply`: server-side apply a spec's objects (a local shortcut to Pulumi)."""

from __future__ import annotations

from pathlib import Path
from typing import Annotated

import typer

from trainmaster.cli._app import app


@app.command()
def apply(
    spec: Annotated[Path, typer.Argument(help="Cluster spec file.")],
    kubeconfig: Annotated[Path | None, typer.Option("--kubeconfig")] = None,
) -> None:
    """Apply every object of a spec with server-side apply (field manager `trainmaster`).

    An object whose change reaches an immutable field (a PriorityClass's value or
    preemptionPolicy, a selector, a roleRef...) is replaced: deleted, then created. Anything
    else the API server would refuse stops the apply before any object is written."""
    from rich.console import Console

    from trainmaster.apply import apply_spec
    from trainmaster.spec import load_spec

    err = Console(stderr=True, soft_wrap=True)  # a line per message, never wrapped
    cluster = load_spec(spec)
    with err.status("applying") as status:
        def report(step: str) -> None:
            # A replacement deletes an object: it stays on screen, the rest is progress.
            if step.startswith("replacing "):
                err.print(step, highlight=False)
            status.update(step)

        applied = apply_spec(kubeconfig, cluster, report)
    err.print(f"applied {len(applied)} objects of {cluster.metadata.name}")
