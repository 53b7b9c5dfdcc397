"""`trainmaster cache warm`: make one dataset complete in this node's cache."""

from __future__ import annotations

import json
import shutil
import sys
from dataclasses import dataclass, field
from pathlib import Path
from typing import TextIO

from trainmaster.datacache._progress import Meter
from trainmaster.datacache._progress import human as _human
from trainmaster.datacache._sources import fetch, resumable
from trainmaster.datacache._store import CacheStore

SOURCE_FILE = ".trainmaster-source"
"""In a partial directory: the source it is being filled from (a resumed warm-up keeps the
partial only when it is the same)."""


@dataclass
class WarmResult:
    dataset: str
    bytes: int
    already: bool
    evicted: list[str] = field(default_factory=list)
    held: list[str] = field(default_factory=list)

    def message(self) -> str:
        """The termination message the operator reads to label the node (kept well under
        the kubelet's 4096-byte limit: names only)."""
        return json.dumps({"dataset": self.dataset, "held": self.held,
                           "evicted": self.evicted}, separators=(",", ":"))[:4000]


def failure_message(dataset: str, error: str) -> str:
    """The termination message of a failed warm-up: the operator shows `error` on the jobs
    that wait for the dataset (condition and Event)."""
    return json.dumps({"dataset": dataset, "error": error[:3500]}, separators=(",", ":"))


def _start_partial(partial: Path, source: str) -> bool:
    """Make the partial directory ready; return whether an earlier copy is carried on."""
    keep = resumable(source) and partial.is_dir() and _partial_source(partial) == source
    if not keep:
        shutil.rmtree(partial, ignore_errors=True)  # what a killed warm-up left
        partial.mkdir()
        (partial / SOURCE_FILE).write_text(source)
    return keep


def _partial_source(partial: Path) -> str | None:
    try:
        return (partial / SOURCE_FILE).read_text()
    except OSError:
        return None


def warm(dataset: str, source: str, path: Path, capacity: int, size: int | None = None,
         out: TextIO = sys.stderr, workers: int | None = None) -> WarmResult:
    """Fill `path` (`<cache root>/<dataset>`) from `source`, evicting least recently used
    datasets to stay within `capacity` bytes. `size` (the spec's declared size) lets the
    eviction make room before the copy; the actual size is checked after it. A resumable
    source (s3://) carries on from what an earlier, interrupted warm-up completed."""
    store = CacheStore(path.parent, capacity)
    store.root.mkdir(parents=True, exist_ok=True)
    found = store.complete(path.name, source)
    if found is not None:
        store.touch(path.name)
        print(f"{dataset}: already complete in {path} ({_human(found.bytes)})",
              file=out, flush=True)
        return WarmResult(dataset, found.bytes, True, [], [h.name for h in store.held()])
    evicted = store.evict_for(size, path.name) if size else []
    partial = store.partial(path.name)
    if _start_partial(partial, source):
        print(f"{dataset}: resuming the copy in {partial}", file=out, flush=True)
    meter = Meter(dataset, out)
    try:
        copied = fetch(source, partial, meter, workers=workers)
        meter.finish(copied, copied)
        evicted += [e for e in store.evict_for(copied, path.name) if e not in evicted]
    except BaseException:
        if not resumable(source):  # an s3:// copy keeps its complete objects for the next
            shutil.rmtree(partial, ignore_errors=True)
        raise
    (partial / SOURCE_FILE).unlink(missing_ok=True)
    shutil.rmtree(path, ignore_errors=True)  # an incomplete copy, or one of another source
    partial.rename(path)
    store.mark_complete(path.name, source, copied)
    for name in evicted:
        print(f"evicted {name} (least recently used) to fit {dataset}", file=out, flush=True)
    print(f"{dataset}: complete in {path} ({_human(copied)})", file=out, flush=True)
    return WarmResult(dataset, copied, False, evicted, [h.name for h in store.held()])


__all__ = ["WarmResult", "failure_message", "warm"]
