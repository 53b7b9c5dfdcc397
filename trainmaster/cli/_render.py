"""`trainmaster render`: the spec's objects as YAML, for Argo CD / Flux users."""

from __future__ import annotations

from pathlib import Path
from typing import Annotated

import typer

from trainmaster.cli._app import app


@app.command()
def render(
    spec: Annotated[Path, typer.Argument(help="Cluster spec file.")],
    output: Annotated[
        Path | None,
        typer.Option(
            "-o",
            "--output",
            help="Folder to write (one file per component + kustomization.yaml);"
            " default: all objects to stdout.",
        ),
    ] = None,
) -> None:
    """Write the Kubernetes objects of a spec: the same objects Pulumi and the operator use."""
    from trainmaster.objects import all_objects, render_to_dir, to_yaml
    from trainmaster.spec import load_spec

    cluster = load_spec(spec)
    if output is None:
        print(to_yaml(all_objects(cluster)), end="")
        return
    for path in render_to_dir(cluster, output):
        typer.echo(f"wrote {path}", err=True)
