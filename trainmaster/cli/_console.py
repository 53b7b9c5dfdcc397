"""Rich consoles for command output that survives a pipe.

On a terminal, tables fit its width. Anywhere else (a pipe, a CI log) rich would assume
80 columns and cut numbers to `0.…`; there the width is unbounded, so every table comes
out at its natural width, uncut, and without colour codes.
"""

from __future__ import annotations

import sys
from typing import TYPE_CHECKING, Any, cast

if TYPE_CHECKING:
    from rich.console import Console

UNBOUNDED = 100_000


def stdout_console() -> Console:
    from rich.console import Console

    if sys.stdout.isatty():
        return Console()
    return Console(width=UNBOUNDED, highlight=False)


def stderr_console() -> Console:
    from rich.console import Console

    if sys.stderr.isatty():
        return Console(stderr=True, soft_wrap=True)
    return Console(stderr=True, width=UNBOUNDED, soft_wrap=True, highlight=False)


class _LazyConsole:
    """A module-level console made on first use: importing a command module for --help
    should not import rich's console (a fifth of a second)."""

    def __init__(self, kwargs: dict[str, Any]) -> None:
        self._kwargs = kwargs
        self._console: Console | None = None

    def __getattr__(self, name: str) -> Any:
        if self._console is None:
            from rich.console import Console

            self._console = Console(**self._kwargs)
        return getattr(self._console, name)


def lazy_console(**kwargs: Any) -> Console:
    return cast("Console", _LazyConsole(kwargs))
