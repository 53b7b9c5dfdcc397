"""`trainmaster plan`: what a change to spec files does, as a PR comment or JSON."""

from __future__ import annotations

from pathlib import Path
from typing import Annotated

import typer

from trainmaster.cli._app import app


@app.command()
def plan(
    base: Annotated[
        str, typer.Option("--base", metavar="REV",
                          help="Git revision before the change, e.g. origin/main.")
    ],
    specs: Annotated[
        list[Path] | None,
        typer.Argument(metavar="[SPEC]...",
                       help="Spec files (default: every stacks/*/cluster.yaml at either side)."),
    ] = None,
    head: Annotated[
        str | None,
        typer.Option("--head", metavar="REV",
                     help="Git revision after the change (default: the working tree)."),
    ] = None,
    as_json: Annotated[
        bool, typer.Option("--json", help="Print JSON instead of Markdown.")
    ] = False,
) -> None:
    """Compare spec files at two revisions: jobs added, removed and changed, GPU demand per
    queue, changed settings and new policy findings. Markdown (for a pull-request comment)
    by default. The plan is printed in every case; the exit code is 0 when every spec at
    the head loads, whatever it finds (`policy check` gates); 1 when a spec at the head is
    invalid; 2 when a revision or a file cannot be read (at head, or at neither side)."""
    from trainmaster.plan import build_plan, render_json, render_markdown

    result = build_plan(base, head, specs or [])
    if as_json:
        print(render_json(result))
    else:
        print(render_markdown(result), end="")
    code = 0
    for stack in result.stacks:
        if stack.head.status == "unreadable" or (
            stack.head.status == "absent" and stack.base.status == "absent"
        ):
            code = 2
            typer.echo(f"error: {stack.path}: cannot be read at the head"
                       + (" or the base" if stack.base.status == "absent" else ""), err=True)
        elif stack.head.status == "invalid":
            code = max(code, 1)
            typer.echo(f"error: {stack.path}: the spec at the head is invalid "
                       f"({len(stack.head.errors)} problem(s); `trainmaster validate` "
                       "explains)", err=True)
    raise typer.Exit(code)
