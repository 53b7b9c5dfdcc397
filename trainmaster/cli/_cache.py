"""`trainmaster cache warm`: what each dataset warm-up pod runs on its node."""

from __future__ import annotations

from pathlib import Path
from typing import Annotated

import typer

from trainmaster.cli._app import app

cache_app = typer.Typer(help="The node-local dataset cache.", no_args_is_help=True)
app.add_typer(cache_app, name="cache")

TERMINATION_LOG = Path("/dev/termination-log")


@cache_app.command("warm")
def cache_warm(
    dataset: Annotated[str, typer.Option("--dataset", help="Dataset name (cache.datasets).")],
    source: Annotated[str, typer.Option("--source", help="Where it lives: file:///path, a "
                                        "path, http(s)://, or s3://bucket/prefix (AWS_* "
                                        "variables and profiles apply).")],
    path: Annotated[Path, typer.Option("--path", help="Its directory in the node's cache: "
                                       "<cache.path>/<dataset>.")],
    capacity: Annotated[str, typer.Option("--capacity", help="Cache capacity on this node "
                                          "(a quantity, e.g. 4Ti); least recently used "
                                          "datasets are evicted to stay within it.")],
    size: Annotated[str | None, typer.Option("--size", help="Declared dataset size, to make "
                                             "room before copying.")] = None,
    workers: Annotated[int, typer.Option("--workers", min=1, max=256,
                                         help="Objects downloaded at once (s3://).")] = 8,
    termination_log: Annotated[Path | None, typer.Option(
        "--termination-log", help="Write what the node holds here for the operator "
        "(default: /dev/termination-log when it exists).")] = None,
) -> None:
    """Fill this node's cache with a dataset from its source: progress on stderr, a
    completion marker, LRU eviction over capacity; the datasets held go to the pod's
    termination message, from which the operator labels the node. A failure's message
    goes there too, so the operator can show it on the jobs that wait for the dataset."""
    from trainmaster.datacache import failure_message, warm
    from trainmaster.errors import TrainmasterError, UsageError
    from trainmaster.spec import parse_quantity

    try:
        limit = parse_quantity(capacity)
        declared = parse_quantity(size) if size else None
    except ValueError as exc:
        raise UsageError(f"--capacity/--size: {exc}; give a quantity such as 4Ti") from None
    target = termination_log
    if target is None and TERMINATION_LOG.exists():
        target = TERMINATION_LOG
    try:
        result = warm(dataset, source, path, limit, declared, workers=workers)
    except (TrainmasterError, OSError) as exc:
        _report(target, failure_message(dataset, str(exc)))
        raise
    _report(target, result.message())


def _report(target: Path | None, message: str) -> None:
    if target is None:
        return
    try:
        target.write_text(message)
    except OSError as exc:
        typer.echo(f"warning: cannot write {target}: {exc.strerror or exc}", err=True)
