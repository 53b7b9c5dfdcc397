"""`trainmaster cache warm`: make one dataset complete in this node's cache."""

from __future__ import annotations

import json
import shutil
import sys
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import TextIO

from trainmaster.datacache._sources import fetch
from trainmaster.datacache._store import CacheStore


def _human(n: int) -> str:
    size = float(n)
    for unit in ("B", "KiB", "MiB", "GiB", "TiB"):
        if size < 1024 or unit == "TiB":
            return f"{size:.0f} {unit}" if unit == "B" else f"{size:.1f} {unit}"
        size /= 1024
    return f"{n} B"


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


class _Meter:
    """Progress lines on stderr, at most one a second and one at the end."""

    def __init__(self, dataset: str, out: TextIO, every: float = 1.0) -> None:
        self.dataset, self.out, self.every = dataset, out, every
        self.last = 0.0

    def __call__(self, done: int, total: int | None, final: bool = False) -> None:
        now = time.monotonic()
        if not final and now - self.last < self.every:
            return
        self.last = now
        share = f" ({100 * done // total}%)" if total else ""
        of = f" of {_human(total)}" if total else ""
        print(f"warming {self.dataset}: {_human(done)}{of}{share}", file=self.out,
              flush=True)


def warm(dataset: str, source: str, path: Path, capacity: int, size: int | None = None,
         out: TextIO = sys.stderr) -> WarmResult:
    """Fill `path` (`<cache root>/<dataset>`) from `source`, evicting least recently used
    datasets to stay within `capacity` bytes. `size` (the spec's declared size) lets the
    eviction make room before the copy; the actual size is checked after it."""
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
    shutil.rmtree(partial, ignore_errors=True)  # what a killed warm-up left
    partial.mkdir()
    meter = _Meter(dataset, out)
    try:
        copied = fetch(source, partial, meter)
        meter(copied, copied, final=True)
        evicted += [e for e in store.evict_for(copied, path.name) if e not in evicted]
    except BaseException:
        shutil.rmtree(partial, ignore_errors=True)
        raise
    shutil.rmtree(path, ignore_errors=True)  # an incomplete copy, or one of another source
    partial.rename(path)
    store.mark_complete(path.name, source, copied)
    for name in evicted:
        print(f"evicted {name} (least recently used) to fit {dataset}", file=out, flush=True)
    print(f"{dataset}: complete in {path} ({_human(copied)})", file=out, flush=True)
    return WarmResult(dataset, copied, False, evicted, [h.name for h in store.held()])


__all__ = ["WarmResult", "warm"]
