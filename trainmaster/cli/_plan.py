"""`trainmaster plan`: what a change to spec files does, as a PR comment or JSON."""

from __future__ import annotations

from pathlib import Path
from typing import Annotated

import typer

from trainmaster.cli._app import app


@app.command()
def plan(
    base: Annotated[
        str, typer.Option("--base", help="Git revision before the change, e.g. origin/main.")
    ],
    specs: Annotated[
        list[Path] | None,
        typer.Argument(help="Spec files (default: every stacks/*/cluster.yaml at either side)."),
    ] = None,
    head: Annotated[
        str | None,
        typer.Option("--head", help="Git revision after the change (default: the working tree)."),
    ] = None,
    as_json: Annotated[
        bool, typer.Option("--json", help="Print JSON instead of Markdown.")
    ] = False,
) -> None:
    """Compare spec files at two revisions: jobs added, removed and changed, GPU demand per
    queue, changed settings and new policy findings. Markdown (for a pull-request comment)
    by default. Exit 0 when the plan is made, whatever it finds (`policy check` gates);
    2 when a revision or file cannot be read."""
    from trainmaster.plan import build_plan, render_json, render_markdown

    result = build_plan(base, head, specs or [])
    if as_json:
        print(render_json(result))
    else:
        print(render_markdown(result), end="")
