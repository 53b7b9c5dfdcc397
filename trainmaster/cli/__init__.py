"""The `trainmaster` command: parse arguments, call the library, print. Nothing else.

Exit codes come from the exception tree: a TrainmasterError exits with its ``exit_code``
and a one-paragraph message on stderr, never a traceback.
"""

from __future__ import annotations

import importlib
import pkgutil
import sys

import click
import typer

from trainmaster.cli._app import app
from trainmaster.errors import TrainmasterError

# Every private module of this package is a command module: importing it registers its
# commands on `app` (so adding a command never means editing this file).
for _module in pkgutil.iter_modules(__path__):
    if _module.name.startswith("_") and _module.name != "_app":
        importlib.import_module(f"{__name__}.{_module.name}")


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
