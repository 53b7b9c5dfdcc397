"""The `trainmaster` command: parse arguments, call the library, print. Nothing else.

Exit codes come from the exception tree: a TrainmasterError exits with its ``exit_code``
and a one-paragraph message on stderr, a usage error with 2 and one line, never a
traceback (``_app.invoke``).
"""

from __future__ import annotations

import importlib
import pkgutil
import sys

import typer

from trainmaster.cli._app import app, invoke

# Every private module of this package is a command module: importing it registers its
# commands on `app` (so adding a command never means editing this file).
for _module in pkgutil.iter_modules(__path__):
    if _module.name.startswith("_") and _module.name != "_app":
        importlib.import_module(f"{__name__}.{_module.name}")


def main(argv: list[str] | None = None) -> int:
    return invoke(argv)


def run() -> None:
    sys.exit(main())


__all__ = ["app", "main", "run", "typer"]
