"""`trainmaster tools build|path|env`, and how every command announces and shows a build."""

from __future__ import annotations

import time
from collections.abc import Iterable
from pathlib import Path
from typing import Annotated

import typer

from trainmaster.cli._app import tools_app
from trainmaster.errors import UsageError
from trainmaster.toolchain import (
    ABOUT,
    BUILD_JOBS,
    RECIPES,
    SOURCES_ENV,
    BuildResult,
    build,
    cache_root,
    family_dir,
    is_built,
    read_source,
)

PROGRESS_LINE_SECONDS = 60.0
"""Without a terminal, a progress line per family at least this often while it builds."""


def started_line(family: str) -> str:
    """What a family is and roughly how long its cold build takes, as its build starts."""
    recipe, about = RECIPES[family], ABOUT.get(family)
    what = about.what if about is not None else ", ".join(recipe.binaries)
    rough = f"; a cold build takes {about.duration()} on 2 cores" if about is not None else ""
    return f"{family} {recipe.version}: building {what}{rough}"


def missing_tools(families: Iterable[str]) -> list[str]:
    return [family for family in families if not is_built(family)]


def rough_minutes(families: Iterable[str], jobs: int = BUILD_JOBS) -> int:
    """An upper bound on building ``families`` cold, ``jobs`` at once: the upper end of each
    family's cold build alone (toolchain.ABOUT) spread over the streams, and never less
    than the longest. Built together they share Go's build cache and take less (every
    family: 29 min on an idle 2-core machine, docs/benchmarks.md)."""
    uppers = [ABOUT[family].cold_minutes[1] if family in ABOUT else 3 for family in families]
    if not uppers:
        return 1
    return max(1, max(uppers), -(-sum(uppers) // max(1, jobs)))


def announce(missing: list[str], why: str | None, jobs: int = BUILD_JOBS) -> None:
    """Before a build: what, why and roughly how long, on stderr."""
    at_once = f", {min(jobs, len(missing))} at once" if len(missing) > 1 else ""
    typer.echo(
        f"building {', '.join(missing)} from pinned Go modules into {cache_root()}"
        + (f", needed by {why}" if why else "")
        + f": roughly {rough_minutes(missing, jobs)} minutes at most on 2 cores{at_once}, "
        "once (later runs reuse the build)", err=True)


def build_with_progress(families: list[str], why: str | None = None,
                        jobs: int = BUILD_JOBS, sources: Path | None = None) -> None:
    """Build (or reuse) families on stderr: announced first, then a progress bar per family
    on a terminal, or a plain line per family and every 10% of its packages otherwise."""
    from rich.console import Console

    missing = missing_tools(families)
    if missing:
        announce(missing, why, jobs)
    err = Console(stderr=True, highlight=False, soft_wrap=True)
    if not err.is_terminal:
        _build_with_lines(families, err, jobs, sources)
        return
    from rich.progress import (
        BarColumn,
        MofNCompleteColumn,
        Progress,
        TaskID,
        TextColumn,
        TimeElapsedColumn,
    )

    with Progress(
        TextColumn("[bold]{task.description}"),
        BarColumn(),
        MofNCompleteColumn(),
        TextColumn("packages"),
        TimeElapsedColumn(),
        console=err,
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

        def started(family: str) -> None:
            progress.console.print(started_line(family), highlight=False, soft_wrap=True)

        def finished(result: BuildResult) -> None:
            progress.console.print(_finished_line(result), highlight=False, soft_wrap=True)

        build(families, report, started, jobs=jobs, finished=finished, sources=sources)


def _finished_line(result: BuildResult) -> str:
    state = "cached" if result.cached else f"built in {result.seconds:.0f}s"
    origin = read_source(result.directory)
    return f"{result.family}: {state} -> {result.directory}" + (
        f" (from the {origin})" if origin else "")


def _build_with_lines(families: list[str], err: object, jobs: int,
                      sources: Path | None = None) -> None:
    """Progress for a log: no cursor tricks, one line at a time."""
    from rich.console import Console

    assert isinstance(err, Console)
    begun: dict[str, float] = {}
    shown: dict[str, tuple[int, float]] = {}

    def started(family: str) -> None:
        begun[family] = time.monotonic()
        err.print(started_line(family))

    def report(family: str, done: int, total: int) -> None:
        # A line every tenth of the packages, and at least one a minute: a long build is
        # never a silent stretch of a CI log.
        now = time.monotonic()
        tenth = 10 * done // total if total else 0
        last_tenth, last_time = shown.get(family, (-1, now))
        if tenth == last_tenth and now - last_time < PROGRESS_LINE_SECONDS:
            return
        shown[family] = (tenth, now)
        err.print(f"go build {family} {RECIPES[family].version}: {done}/{total} packages "
                  f"({now - begun.get(family, now):.0f}s)")

    build(families, report, started, jobs=jobs,
          finished=lambda result: err.print(_finished_line(result)), sources=sources)


def _known(families: list[str]) -> list[str]:
    unknown = [f for f in families if f not in RECIPES]
    if unknown:
        raise UsageError(f"unknown tool famil{'y' if len(unknown) == 1 else 'ies'} "
                         f"{', '.join(unknown)}; known: {', '.join(RECIPES)}")
    return families


@tools_app.command("build")
def build_cmd(
    families: Annotated[list[str] | None, typer.Argument(
        metavar="[FAMILY]...", help=f"Families (default: all): {', '.join(RECIPES)}.")] = None,
    jobs: Annotated[int, typer.Option(
        "--jobs", "-j", min=1, help="Families built at once (one shared Go build cache; each "
        "Go build also uses every core).")] = BUILD_JOBS,
    sources: Annotated[Path | None, typer.Option(
        "--sources", envvar=SOURCES_ENV, file_okay=False, help="Folder of upstream source "
        "archives, for the families whose module the Go module proxy refuses (multus, "
        "kube-router, jobset): each archive's sha256 must be the pinned one.")] = None,
) -> None:
    """Build the pinned binaries into the cache (reused when already built)."""
    build_with_progress(_known(families or list(RECIPES)), why="`trainmaster tools build`",
                        jobs=jobs, sources=sources)


@tools_app.command("list")
def list_cmd() -> None:
    """Each family: its version, whether it is built, and where its code came from."""
    for family, recipe in RECIPES.items():
        folder = family_dir(family)
        if not is_built(family):
            state = "not built"
        else:
            origin = read_source(folder)
            state = f"built from the {origin}" if origin else "built from its pinned Go modules"
        print(f"{family} {recipe.version}: {state}")


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
    kubeconfig as `trainmaster pulumi`, so both share stacks. Missing tools are built first
    (announced on stderr: roughly 20 minutes on 2 cores, once).
    """
    import os

    from trainmaster.engine import SHELL_FAMILIES, find_project, shell_env, shell_exports

    project_dir = find_project()
    missing = missing_tools(SHELL_FAMILIES)
    if missing:  # progress on stderr: stdout is for eval
        build_with_progress(missing, why="`trainmaster tools env` (plain `pulumi` in a shell)")
    print(shell_exports(shell_env(project_dir), os.environ), end="")
