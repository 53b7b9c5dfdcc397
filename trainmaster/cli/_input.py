"""Spec files named on a command line, where `-` means standard input (as for kubectl -f -)."""

from __future__ import annotations

import sys
from pathlib import Path
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from trainmaster.spec import ClusterSpec

STDIN = "-"


def spec_source(path: Path | str) -> str:
    """How a spec is named in messages: its path, or <stdin>."""
    return "<stdin>" if str(path) == STDIN else str(path)


def read_spec(path: Path | str) -> ClusterSpec:
    """Load and validate a spec file, or standard input for `-`."""
    from trainmaster.spec import SpecReadError, load_spec, load_spec_text

    if str(path) != STDIN:
        return load_spec(path)
    raw = sys.stdin.buffer.read()
    try:
        text = raw.decode("utf-8")
    except UnicodeDecodeError as exc:
        raise SpecReadError("<stdin>", f"not UTF-8 text (byte {exc.start})") from None
    return load_spec_text(text, "<stdin>")
