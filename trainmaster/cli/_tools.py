"""`trainmaster tools build|path|env`."""

from __future__ import annotations

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
from trainmaster.errors import UsageError
from trainmaster.toolchain import RECIPES, build, family_dir, is_built

_err = Console(stderr=True)


def build_with_progress(families: list[str]) -> None:
    """Build (or reuse) families, showing a progress bar per family on stderr."""
    with Progress(
        TextColumn("[bold]{task.description}"),
        BarColumn(),
        MofNCompleteColumn(),
        TextColumn("packages"),
        TimeElapsedColumn(),
        console=_err,
        transient=False,
    ) as progress:
        tasks: dict[str, TaskID] = {}

        def report(family: str, done: int, total: int) -> None:
            if family not in tasks:
                recipe = RECIPES[family]
                tasks[family] = progress.add_task(
                    f"go build {family} {recipe.version}", total=total
                )
            progress.update(tasks[family], completed=done, total=total)

        for result in build(families, report):
            state = "cached" if result.cached else f"built in {result.seconds:.0f}s"
            progress.console.print(f"{result.family}: {state} -> {result.directory}")


@tools_app.command("build")
def build_cmd(
    families: Annotated[list[str] | None, typer.Argument(help="Families (default: all).")] = None,
) -> None:
    """Build the pinned binaries into the cache (reused when already built)."""
    build_with_progress(_known(families or list(RECIPES)))


def _known(families: list[str]) -> list[str]:
    unknown = [f for f in families if f not in RECIPES]
    if unknown:
        raise UsageError(f"unknown tool famil{'y' if len(unknown) == 1 else 'ies'} "
                         f"{', '.join(unknown)}; known: {', '.join(RECIPES)}")
    return families


@tools_app.command("path")
def path_cmd(
    family: Annotated[str, typer.Argument(metavar="FAMILY", help="A tool family (see "
                                          "`trainmaster tools build --help`).")],
) -> None:
    """Print the cache folder of a tool family."""
    print(family_dir(_known([family])[0]))


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
