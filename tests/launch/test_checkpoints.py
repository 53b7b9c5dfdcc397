"""Which checkpoints count as complete, on real directories."""

from __future__ import annotations

import os
from pathlib import Path

import pytest

from trainmaster.launch import CheckpointWatcher, step_of


@pytest.mark.parametrize(("name", "step"), [
    ("checkpoint-1200", 1200), ("global_step1200", 1200), ("iter_0001200", 1200),
    ("step_1200.pt", 1200), ("ckpt-7.tar.gz", 7), ("model.pt", None), ("latest", None),
    ("checkpoint-1300.tmp", None), (".checkpoint-1300", None), ("step-5.partial", None),
])
def test_step_of(name: str, step: int | None) -> None:
    assert step_of(name) == step


class Clock:
    def __init__(self) -> None:
        self.now = 1_000_000.0

    def __call__(self) -> float:
        return self.now


def _write(path: Path, mtime: float, files: int = 2) -> None:
    path.mkdir(parents=True)
    for i in range(files):
        shard = path / f"shard-{i}.bin"
        shard.write_bytes(b"x" * 10)
        os.utime(shard, (mtime, mtime))
    os.utime(path, (mtime, mtime))


def test_a_marker_file_completes_a_checkpoint_at_once(tmp_path: Path) -> None:
    clock = Clock()
    watcher = CheckpointWatcher(tmp_path, settle_seconds=60, clock=clock)
    _write(tmp_path / "checkpoint-100", clock.now)
    assert watcher.poll() is None
    (tmp_path / "checkpoint-100" / "COMPLETE").touch()
    found = watcher.poll()
    assert found is not None and (found.step, found.how) == (100, "marker")
    assert watcher.poll() is None  # reported once


def test_without_a_marker_a_checkpoint_completes_once_it_stops_changing(tmp_path: Path) -> None:
    clock = Clock()
    watcher = CheckpointWatcher(tmp_path, settle_seconds=5, clock=clock)
    _write(tmp_path / "step_200", clock.now)
    assert watcher.poll() is None  # first sight
    clock.now += 10
    found = watcher.poll()
    assert found is not None and (found.step, found.how) == (200, "settled")


def test_a_checkpoint_still_being_written_is_not_reported(tmp_path: Path) -> None:
    clock = Clock()
    watcher = CheckpointWatcher(tmp_path, settle_seconds=5, clock=clock)
    _write(tmp_path / "step_300", clock.now - 100)
    assert watcher.poll() is None
    shard = tmp_path / "step_300" / "shard-9.bin"
    shard.write_bytes(b"more")  # a writer at work
    for touched in (shard, shard.parent):
        os.utime(touched, (clock.now, clock.now))
    clock.now += 10
    assert watcher.poll() is None
    clock.now += 10
    found = watcher.poll()
    assert found is not None and found.step == 300


def test_framework_pointer_files_name_the_complete_checkpoint(tmp_path: Path) -> None:
    clock = Clock()
    watcher = CheckpointWatcher(tmp_path, settle_seconds=600, clock=clock)
    _write(tmp_path / "global_step40", clock.now)
    _write(tmp_path / "global_step50", clock.now)  # newer, but not yet declared complete
    (tmp_path / "latest").write_text("global_step40\n")
    found = watcher.poll()
    assert found is not None and (found.step, found.how) == (40, "pointer")
    _write(tmp_path / "iter_0000060", clock.now)
    (tmp_path / "latest_checkpointed_iteration.txt").write_text("60")
    found = watcher.poll()
    assert found is not None and (found.path.name, found.how) == ("iter_0000060", "pointer")


def test_only_newer_checkpoints_are_reported(tmp_path: Path) -> None:
    clock = Clock()
    watcher = CheckpointWatcher(tmp_path, settle_seconds=5, clock=clock)
    _write(tmp_path / "checkpoint-500", clock.now - 100)
    (tmp_path / "checkpoint-500" / "DONE").touch()
    assert watcher.poll() is not None
    _write(tmp_path / "checkpoint-400", clock.now - 100)
    (tmp_path / "checkpoint-400" / "DONE").touch()
    assert watcher.poll() is None
    assert CheckpointWatcher(tmp_path / "missing").poll() is None
