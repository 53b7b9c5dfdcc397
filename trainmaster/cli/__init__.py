"""The `trainmaster` command: parse arguments, call the library, print. Nothing else.

Exit codes come from the exception tree: a TrainmasterError exits with its ``exit_code``
and a one-paragraph message on stderr, never a traceback.
"""

from __future__ import annotations

import sys

import click
import typer

from trainmaster.cli._app import app
from trainmaster.errors import TrainmasterError

# Importing a command module registers its commands on `app`.
from trainmaster.cli import _cluster, _tools, _validate  # noqa: F401  # isort: skip


def main(argv: list[str] | None = None) -> int:
    try:
        # Without standalone mode click returns typer.Exit's code instead of exiting.
        rc = app(args=argv, prog_name="trainmaster", standalone_mode=False)
    except TrainmasterError as exc:
        print(f"error: {exc}", file=sys.stderr)
        return exc.exit_code
    except click.exceptions.Exit as exc:
        return exc.exit_code
    except click.ClickException as exc:
        exc.show()
        return exc.exit_code
    except click.exceptions.Abort:
        print("aborted", file=sys.stderr)
        return 130
    except KeyboardInterrupt:
        print("interrupted", file=sys.stderr)
        return 130
    return rc if isinstance(rc, int) else 0


def run() -> None:
    sys.exit(main())


__all__ = ["app", "main", "run", "typer"]
