"""`trainmaster render`: the spec's objects as YAML, for Argo CD / Flux users."""

from __future__ import annotations

from pathlib import Path
from typing import Annotated

import typer

from trainmaster.cli._app import app
from trainmaster.errors import UsageError


@app.command()
def render(
    spec: Annotated[Path, typer.Argument(metavar="SPEC",
                                         help="Cluster spec file ('-': standard input).")],
    output: Annotated[
        Path | None,
        typer.Option("-o", "--output", metavar="FILE",
                     help="Write all objects to this file instead of standard output."),
    ] = None,
    output_dir: Annotated[
        Path | None,
        typer.Option("--output-dir", metavar="DIR",
                     help="Write a folder instead: one file per component and a "
                     "kustomization.yaml (our files are replaced, nothing else)."),
    ] = None,
) -> None:
    """Write the Kubernetes objects of a spec: the same objects Pulumi and the operator use."""
    if output is not None and output_dir is not None:
        raise UsageError("give -o FILE or --output-dir DIR, not both")
    if output_dir is not None and output_dir.exists() and not output_dir.is_dir():
        raise UsageError(f"--output-dir {output_dir} is a file; give a folder "
                         "(or -o FILE for one YAML file)")
    if output is not None and output.is_dir():
        raise UsageError(f"-o {output} is a folder; give a file (or --output-dir DIR)")
    from trainmaster.cli._input import read_spec
    from trainmaster.objects import all_objects, render_to_dir, to_yaml

    cluster = read_spec(spec)
    if output_dir is not None:
        for path in render_to_dir(cluster, output_dir):
            typer.echo(f"wrote {path}", err=True)
        return
    text = to_yaml(all_objects(cluster))
    if output is None:
        print(text, end="")
        return
    output.write_text(text)
    typer.echo(f"wrote {output}", err=True)
