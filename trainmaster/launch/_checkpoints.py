"""Finding the newest *complete* checkpoint in a checkpoint directory, by polling.

A checkpoint is an entry (directory or file) of the directory whose name ends in its step:
`checkpoint-1200`, `global_step1200`, `iter_0001200`, `step_1200.pt`. It is complete when
any of these says so, strongest first:

1. the framework's own pointer names it: DeepSpeed's `latest` file (holding the tag, e.g.
   `global_step1200`) or Megatron's `latest_checkpointed_iteration.txt` (holding 1200);
2. a marker file inside it: `COMPLETE`, `.complete`, `DONE` or `.done`, or `.metadata`,
   which torch.distributed.checkpoint (DCP) writes last, once every shard is written;
3. it has not changed (newest mtime, total size, file count) for `settle_seconds`.

Names ending in .tmp/.partial/.incomplete/.lock, and hidden names, are never checkpoints:
that is how writers that rename on completion stay invisible until they are done.

At start-up (newest_complete, for resuming) only evidence counts, never rule 3: a pointer,
a marker, or, for a single-file checkpoint, torch.save's zip format ending in its central
directory (written last). A half-written checkpoint is never resumed from.
"""

from __future__ import annotations

import os
import re
import time
import zipfile
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

STEP = re.compile(r"(\d+)(?:\.[A-Za-z][A-Za-z0-9]*)*$")
MARKERS = ("COMPLETE", ".complete", "DONE", ".done", ".metadata")
IN_PROGRESS = (".tmp", ".partial", ".incomplete", ".lock")
POINTERS = ("latest", "latest_checkpointed_iteration.txt")


@dataclass(frozen=True)
class Found:
    path: Path
    step: int
    how: str
    """pointer, marker or settled."""


def step_of(name: str) -> int | None:
    if name.startswith(".") or name.endswith(IN_PROGRESS) or name in POINTERS:
        return None
    match = STEP.search(name)
    return int(match.group(1)) if match else None


def _signature(path: Path) -> tuple[float, int, int]:
    """(newest mtime, total bytes, files) two levels deep: enough to see a writer at work
    without walking a sharded checkpoint of thousands of files on every poll."""
    newest, size, count = 0.0, 0, 0
    stack = [(path, 0)]
    while stack:
        current, depth = stack.pop()
        try:
            info = current.stat()
        except OSError:
            continue
        newest = max(newest, info.st_mtime)
        if not current.is_dir():
            size += info.st_size
            count += 1
            continue
        if depth >= 2:
            continue
        try:
            with os.scandir(current) as entries:
                stack.extend((Path(e.path), depth + 1) for e in entries)
        except OSError:
            continue
    return newest, size, count


def _pointed(directory: Path) -> set[str]:
    """Entry names a framework's pointer file declares complete."""
    names: set[str] = set()
    for pointer in POINTERS:
        try:
            text = (directory / pointer).read_text().strip()
        except OSError:
            continue
        if not text:
            continue
        names.add(text)
        if text.isdigit():  # Megatron: an iteration number -> iter_0001200
            names.add(f"iter_{int(text):07d}")
    return names


def candidates(directory: Path) -> list[tuple[int, Path]]:
    """(step, path) of the directory's entries that name a step, newest first."""
    try:
        with os.scandir(directory) as entries:
            found = [(step_of(e.name), Path(e.path)) for e in entries]
    except OSError:
        return []
    return sorted(((s, p) for s, p in found if s is not None), reverse=True)


def evidence(path: Path, pointed: set[str]) -> str | None:
    """How `path` is known complete without watching it: "pointer", "marker", "zip"."""
    if path.name in pointed:
        return "pointer"
    if path.is_dir():
        return "marker" if any((path / m).exists() for m in MARKERS) else None
    # torch.save (PyTorch >= 1.6) writes a zip archive, whose central directory comes last.
    try:
        return "zip" if path.is_file() and zipfile.is_zipfile(path) else None
    except OSError:
        return None


def newest_complete(directory: Path) -> Found | None:
    """The newest checkpoint of `directory` that evidence shows complete, or None."""
    pointed = _pointed(directory)
    for step, path in candidates(directory):
        how = evidence(path, pointed)
        if how is not None:
            return Found(path, step, how)
    return None


class CheckpointWatcher:
    """poll() returns a checkpoint newer than any returned before, once it is complete."""

    def __init__(
        self,
        directory: Path,
        settle_seconds: float = 5.0,
        clock: Callable[[], float] = time.time,
    ) -> None:
        self.directory = directory
        self.settle_seconds = settle_seconds
        self._clock = clock
        self._seen: dict[str, tuple[float, int, int]] = {}
        self.reported_step = -1

    def _complete(self, path: Path, pointed: set[str]) -> str | None:
        if path.name in pointed:
            return "pointer"
        if path.is_dir() and any((path / m).exists() for m in MARKERS):
            return "marker"
        signature = _signature(path)
        previous = self._seen.get(path.name)
        self._seen[path.name] = signature
        quiet = self._clock() - signature[0]
        if previous == signature and quiet >= self.settle_seconds:
            return "settled"
        return None

    def poll(self) -> Found | None:
        pointed = _pointed(self.directory)
        for step, path in candidates(self.directory):
            if step <= self.reported_step:
                break
            how = self._complete(path, pointed)
            if how is not None:
                self.reported_step = step
                return Found(path, step, how)
        return None
