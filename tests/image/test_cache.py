"""The image cache keeps the newest builds of a reference and drops killed builds' work."""

from __future__ import annotations

import os
import time
from pathlib import Path

from trainmaster.image._build import KEEP_BUILDS, _prune, _slug


def _entry(root: Path, name: str, age: float) -> Path:
    entry = root / name
    entry.mkdir()
    (entry / ".complete").touch()
    when = time.time() - age
    os.utime(entry / ".complete", (when, when))
    return entry


def test_prune_keeps_the_newest_builds_of_the_reference(tmp_path: Path) -> None:
    ref = "trainmaster.local/trainmaster:0.1.0"
    mine = [_entry(tmp_path, f"{i:020d}-{_slug(ref)}", age=i * 60) for i in range(5)]
    other = _entry(tmp_path, f"{9:020d}-{_slug('x.local/y:1')}", age=9999)
    unfinished = tmp_path / f"{7:020d}-{_slug(ref)}"
    unfinished.mkdir()
    stale, fresh = tmp_path / ".build-old", tmp_path / ".build-new"
    stale.mkdir()
    fresh.mkdir()
    os.utime(stale, (time.time() - 7 * 3600,) * 2)
    _prune(tmp_path, ref)
    assert [p.exists() for p in mine] == [True] * KEEP_BUILDS + [False] * (5 - KEEP_BUILDS)
    assert other.exists() and unfinished.exists() and fresh.exists() and not stale.exists()
