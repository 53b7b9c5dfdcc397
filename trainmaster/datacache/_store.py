"""One node's cache directory: which datasets it holds complete, and least-recently-used
eviction to stay within the cache's capacity.

    <root>/<dataset>/                    the dataset, complete
    <root>/<dataset>/.trainmaster-complete   the completion marker (JSON: source, bytes,
                                         completedAt); its mtime is the last use
    <root>/.partial-<dataset>/           a warm-up in progress (never read by a job)

A dataset counts as held only with its marker: a warm-up killed half-way leaves a partial
directory, which the next warm-up of that dataset replaces. "Used" is a warm-up that
found it (or made it) complete: the warm-up Job runs before the jobs that read it.
"""

from __future__ import annotations

import json
import os
import shutil
import time
from dataclasses import dataclass
from pathlib import Path

from trainmaster.errors import TrainmasterError

MARKER = ".trainmaster-complete"
PARTIAL = ".partial-"


@dataclass(frozen=True)
class Held:
    name: str
    source: str
    bytes: int
    last_used: float


class CapacityError(TrainmasterError):
    """The dataset cannot fit the cache even with everything else evicted."""


class CacheStore:
    def __init__(self, root: Path, capacity: int) -> None:
        self.root = root
        self.capacity = capacity

    def path(self, name: str) -> Path:
        return self.root / name

    def partial(self, name: str) -> Path:
        return self.root / f"{PARTIAL}{name}"

    def held(self) -> list[Held]:
        out: list[Held] = []
        try:
            entries = sorted(self.root.iterdir())
        except OSError:
            return out
        for entry in entries:
            marker = entry / MARKER
            if entry.name.startswith(".") or not marker.is_file():
                continue
            try:
                info = json.loads(marker.read_text())
                out.append(Held(entry.name, str(info.get("source", "")),
                                int(info.get("bytes", 0)), marker.stat().st_mtime))
            except (OSError, ValueError):
                continue  # a marker being rewritten: not held this instant
        return out

    def complete(self, name: str, source: str) -> Held | None:
        return next((h for h in self.held() if h.name == name and h.source == source), None)

    def touch(self, name: str) -> None:
        os.utime(self.path(name) / MARKER)

    def mark_complete(self, name: str, source: str, size: int) -> None:
        marker = self.path(name) / MARKER
        tmp = marker.with_name(MARKER + ".tmp")
        tmp.write_text(json.dumps({"dataset": name, "source": source, "bytes": size,
                                   "completedAt": time.strftime("%Y-%m-%dT%H:%M:%SZ",
                                                                time.gmtime())}))
        tmp.replace(marker)

    def used(self, exclude: str | None = None) -> int:
        return sum(h.bytes for h in self.held() if h.name != exclude)

    def evict_for(self, incoming: int, keep: str) -> list[str]:
        """Remove least recently used datasets (never `keep`) until `incoming` more bytes
        fit; return the names removed. Raises CapacityError if they never would."""
        if incoming > self.capacity:
            raise CapacityError(
                f"dataset {keep} ({incoming} bytes) is larger than the cache capacity "
                f"({self.capacity} bytes); raise cache.capacity in the spec or shrink the "
                "dataset")
        evicted: list[str] = []
        others = sorted((h for h in self.held() if h.name != keep), key=lambda h: h.last_used)
        used = sum(h.bytes for h in others)
        for victim in others:
            if used + incoming <= self.capacity:
                break
            shutil.rmtree(self.path(victim.name), ignore_errors=True)
            used -= victim.bytes
            evicted.append(victim.name)
        return evicted
