"""`trainmaster checkpoints fetch|mirror`: what a gang pod runs beside its trainer when its
job mirrors checkpoints to an S3 server (jobs[].checkpoint.mirror)."""

from __future__ import annotations

import signal
import threading
from pathlib import Path
from types import FrameType
from typing import Annotated

import typer

from trainmaster.cli._app import app

checkpoints_app = typer.Typer(help="Checkpoints mirrored to an S3 server.",
                              no_args_is_help=True)
app.add_typer(checkpoints_app, name="checkpoints")

DirOption = Annotated[Path, typer.Option("--dir", help="The job's checkpoint directory.")]
UrlOption = Annotated[str, typer.Option("--url", help="s3://bucket/prefix to mirror to "
                                        "(AWS_* variables and profiles apply).")]


@checkpoints_app.command("fetch")
def checkpoints_fetch(directory: DirOption, url: UrlOption) -> None:
    """Fetch the newest mirrored checkpoint if the directory lacks it."""
    from trainmaster.datacache import CheckpointStore, fetch_newest

    fetched = fetch_newest(CheckpointStore(url), directory)
    typer.echo(f"checkpoints fetch: {fetched.reason}", err=True)


@checkpoints_app.command("mirror")
def checkpoints_mirror(
    directory: DirOption,
    url: UrlOption,
    keep: Annotated[int, typer.Option("--keep", min=1, help="Mirrored checkpoints kept "
                                      "(jobs[].checkpoint.keep).")] = 3,
    every: Annotated[float, typer.Option("--every", min=0.1, help="Seconds between looks "
                                         "at the directory.")] = 2.0,
    settle_seconds: Annotated[float, typer.Option(
        "--settle-seconds", min=0, help="An entry unchanged this long, with no marker, is "
        "complete (as the launcher judges it).")] = 5.0,
) -> None:
    """Upload each checkpoint that completes, until SIGTERM."""
    from trainmaster.datacache import CheckpointStore, Mirror, S3Error

    stop = threading.Event()

    def finish(signum: int, _: FrameType | None) -> None:
        stop.set()

    for sig in (signal.SIGTERM, signal.SIGINT):
        signal.signal(sig, finish)
    mirror = Mirror(CheckpointStore(url), directory, keep, settle_seconds)
    typer.echo(f"checkpoints mirror: {directory} -> {url}, keeping {keep}", err=True)
    while True:
        done_now = stop.is_set()
        try:
            while (done := mirror.poll()) is not None:
                typer.echo(f"checkpoints mirror: uploaded {done.entry} (step {done.step}, "
                           f"{done.size} bytes)", err=True)
        except (S3Error, OSError) as exc:  # the server may come back: go on looking
            typer.echo(f"checkpoints mirror: {exc}", err=True)
        if done_now:  # one last look after SIGTERM: a checkpoint written at the end
            return
        stop.wait(every)
