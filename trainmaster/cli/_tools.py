"""`trainmaster tools build|path|env`."""

from __future__ import annotations

import time
from typing import Annotated

import typer
from rich.console import Console
from rich.progress import (
    BarColumn,
    MofNCompleteColumn,
    Progress,
    TaskID,
    TextColumn,
    TimeElapsedColumn,
)

from trainmaster.cli._app import tools_app
from trainmaster.toolchain import ABOUT, RECIPES, build, family_dir, is_built

_err = Console(stderr=True)


PROGRESS_LINE_SECONDS = 60.0
"""Without a terminal, at most one progress line per family this often."""


def build_with_progress(families: list[str]) -> None:
    """Build (or reuse) families, showing a progress bar per family on stderr.

    Every family says what it is and roughly how long a cold build takes as it starts.
    When stderr is not a terminal (a CI log), where no bar is drawn, a line with the
    packages compiled so far follows every ``PROGRESS_LINE_SECONDS``, so a long build is
    never a silent stretch of the log."""
    terminal = _err.is_terminal
    with Progress(
        TextColumn("[bold]{task.description}"),
        BarColumn(),
        MofNCompleteColumn(),
        TextColumn("packages"),
        TimeElapsedColumn(),
        console=_err,
        transient=False,
        disable=not terminal,
    ) as progress:
        tasks: dict[str, TaskID] = {}
        begun: dict[str, float] = {}
        last_line: dict[str, float] = {}

        def started(family: str) -> None:
            recipe, about = RECIPES[family], ABOUT.get(family)
            what = about.what if about is not None else ", ".join(recipe.binaries)
            rough = (f"; a cold build takes {about.duration()} on 2 cores"
                     if about is not None else "")
            begun[family] = last_line[family] = time.monotonic()
            progress.console.print(f"{family} {recipe.version}: building {what}{rough}",
                                   highlight=False, soft_wrap=True)

        def report(family: str, done: int, total: int) -> None:
            if terminal:
                if family not in tasks:
                    recipe = RECIPES[family]
                    tasks[family] = progress.add_task(
                        f"go build {family} {recipe.version}", total=total
                    )
                progress.update(tasks[family], completed=done, total=total)
                return
            now = time.monotonic()
            if now - last_line.get(family, now) >= PROGRESS_LINE_SECONDS:
                last_line[family] = now
                minutes = (now - begun.get(family, now)) / 60
                progress.console.print(f"{family}: {done}/{total} packages compiled, "
                                       f"{minutes:.0f} min so far", highlight=False)

        for result in build(families, report, started):
            state = "cached" if result.cached else f"built in {result.seconds:.0f}s"
            progress.console.print(f"{result.family}: {state} -> {result.directory}",
                                   highlight=False, soft_wrap=True)


@tools_app.command("build")
def build_cmd(
    families: Annotated[list[str] | None, typer.Argument(help="Families (default: all).")] = None,
) -> None:
    """Build the pinned binaries into the cache (reused when already built)."""
    build_with_progress(families or list(RECIPES))


@tools_app.command("path")
def path_cmd(family: str) -> None:
    """Print the cache folder of a tool family."""
    print(family_dir(family))


@tools_app.command("env")
def env_cmd() -> None:
    """Print shell lines for plain `pulumi` in this project: eval "$(trainmaster tools env)".

    They put the built Pulumi CLI, Kubernetes provider and Python language host first on
    PATH, activate the project's virtualenv and set the same local backend, passphrase and
    kubeconfig as `trainmaster pulumi`, so both share stacks. Missing tools are built first.
    """
    import os

    from trainmaster.engine._env import SHELL_FAMILIES, find_project, shell_env, shell_exports

    project_dir = find_project()
    missing = [family for family in SHELL_FAMILIES if not is_built(family)]
    if missing:  # progress on stderr: stdout is for eval
        build_with_progress(missing)
    print(shell_exports(shell_env(project_dir), os.environ), end="")
