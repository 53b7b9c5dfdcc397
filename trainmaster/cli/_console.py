"""Rich consoles for command output that survives a pipe.

On a terminal, tables fit its width. Anywhere else (a pipe, a CI log) rich would assume
80 columns and cut numbers to `0.…`; there the width is unbounded, so every table comes
out at its natural width, uncut, and without colour codes.
"""

from __future__ import annotations

import sys
from typing import TYPE_CHECKING

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
