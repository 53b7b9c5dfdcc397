"""How a copy reports its progress, and the meter `trainmaster cache warm` prints."""

from __future__ import annotations

import time
from typing import Protocol, TextIO


class Progress(Protocol):
    def __call__(self, done: int, total: int | None, detail: str = "", /) -> None:
        """Bytes copied so far, total bytes if known, and a note such as object counts."""


def human(n: int) -> str:
    size = float(n)
    for unit in ("B", "KiB", "MiB", "GiB", "TiB"):
        if size < 1024 or unit == "TiB":
            return f"{size:.0f} {unit}" if unit == "B" else f"{size:.1f} {unit}"
        size /= 1024
    return f"{n} B"


class Meter:
    """Progress on stderr, at most once a second and once at the end: one plain line each
    when the output is not a terminal (a pod's log, CI), one line redrawn in place when it
    is."""

    def __init__(self, dataset: str, out: TextIO, every: float = 1.0) -> None:
        self.dataset, self.out, self.every = dataset, out, every
        self.last = 0.0
        self.tty = out.isatty()
        self.detail = ""

    def __call__(self, done: int, total: int | None, detail: str = "", /) -> None:
        self.detail = detail or self.detail
        now = time.monotonic()
        if now - self.last < self.every:
            return
        self.last = now
        self._print(done, total, self.detail, final=False)

    def finish(self, done: int, total: int | None) -> None:
        self._print(done, total, self.detail, final=True)

    def _print(self, done: int, total: int | None, detail: str, final: bool) -> None:
        share = f" ({100 * done // total}%)" if total else ""
        of = f" of {human(total)}" if total else ""
        note = f", {detail}" if detail else ""
        line = f"warming {self.dataset}: {human(done)}{of}{share}{note}"
        if self.tty:
            end = "\n" if final else ""
            self.out.write(f"\r\x1b[K{line}{end}")
        else:
            self.out.write(line + "\n")
        self.out.flush()
