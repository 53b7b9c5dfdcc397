"""`trainmaster apply`: server-side apply a spec's objects (a local shortcut to Pulumi)."""

from __future__ import annotations

from pathlib import Path
from typing import Annotated

import typer

from trainmaster.cli._app import ContextOpt, KubeconfigOpt, app


@app.command()
def apply(
    spec: Annotated[Path, typer.Argument(help="Cluster spec file.")],
    kubeconfig: KubeconfigOpt = None,
    context: ContextOpt = None,
) -> None:
    """Apply every object of a spec with server-side apply (field manager `trainmaster`)."""
    from rich.console import Console

    from trainmaster.apply import apply_spec
    from trainmaster.spec import load_spec

    err = Console(stderr=True)
    cluster = load_spec(spec)
    with err.status("applying") as status:
        applied = apply_spec(kubeconfig, cluster, lambda step: status.update(step))
    err.print(f"applied {len(applied)} objects of {cluster.metadata.name}")
