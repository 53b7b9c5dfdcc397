"""Progress is a newer training step: parsed from output lines, or read from the progress
file. Output without a newer step is not progress."""

from __future__ import annotations

import os
import re
import sys
import textwrap
from datetime import datetime
from pathlib import Path

import pytest

from trainmaster.launch import (
    STEP_PATTERN,
    LaunchConfig,
    Progress,
    compile_step_pattern,
    run_launch,
)
from trainmaster.launch._progress import LineFeed


@pytest.mark.parametrize(("line", "step"), [
    ("rank 0 step 120 loss 0.25", 120),
    (" iteration      300/  500000 | consumed samples: 2400 | lm loss: 7.1E+00", 300),
    ("{'loss': 1.2, 'global_step': 77}", 77),
    ("global_step=4500 lr=1e-4", 4500),
    ("Step: 12 | loss 3.1", 12),
    ("iter 9 took 0.2s", 9),
])
def test_the_default_pattern_reads_the_common_loggers(line: str, step: int) -> None:
    progress = Progress(compile_step_pattern(STEP_PATTERN))
    assert progress.match(line) == step
    assert progress.step == step


@pytest.mark.parametrize("line", [
    "NCCL WARN Call to ibv_poll_cq failed",
    "stepping down the learning rate",
    "checkpoint step-20 written",
    "epoch 3",
])
def test_lines_without_a_step_are_not_progress(line: str) -> None:
    progress = Progress(compile_step_pattern(STEP_PATTERN))
    assert progress.match(line) is None
    assert progress.step == -1


def test_only_a_newer_step_is_progress() -> None:
    progress = Progress(compile_step_pattern(STEP_PATTERN))
    assert progress.note(5, 100.0)
    assert not progress.note(5, 200.0)  # the same step logged again
    assert not progress.note(3, 300.0)
    assert (progress.step, progress.at) == (5, 100.0)


def test_a_custom_pattern_and_lines_split_across_chunks() -> None:
    progress = Progress(compile_step_pattern(r"\[(\d+)/\d+\]"))
    feed = LineFeed(progress)
    feed.feed(b"epoch 1 [12")
    assert progress.step == -1  # the line has not ended yet
    feed.feed(b"0/500] loss 1.0\nepoch 1 [121/500]\n")
    assert progress.step == 121


def test_a_pattern_without_a_group_is_refused_with_the_fix() -> None:
    with pytest.raises(ValueError, match="no group; put the step in the first group"):
        compile_step_pattern(r"step \d+")
    with pytest.raises(ValueError, match="not a regular expression"):
        compile_step_pattern(r"step (\d+")


def test_the_progress_file_holds_the_step(tmp_path: Path) -> None:
    progress = Progress(None)
    file = tmp_path / "progress"
    file.write_text("41\n")
    progress.read_file(file)
    assert progress.step == 41
    assert progress.at == pytest.approx(file.stat().st_mtime)
    file.write_text("not a step")
    progress.read_file(file)
    assert progress.step == 41


class Beats:
    def __init__(self) -> None:
        self.beats: list[datetime] = []

    def heartbeat(self, when: datetime) -> bool:
        self.beats.append(when)
        return True

    def checkpoint(self, path: str, step: int, when: datetime) -> bool:
        return True


def _run(tmp_path: Path, body: str, **options: object) -> Beats:
    script = tmp_path / "train.py"
    script.write_text(textwrap.dedent(body))
    sink = Beats()
    config = LaunchConfig(job="gpt", namespace="ns", rank=0, heartbeat_seconds=0.05,
                          poll_seconds=0.05, **options)  # type: ignore[arg-type]
    assert run_launch(config, [sys.executable, str(script)], sink) == 0
    return sink


def test_chatter_without_steps_sends_only_the_start(tmp_path: Path) -> None:
    """A hung job that keeps logging: after the start, no heartbeat."""
    sink = _run(tmp_path, """
        import time
        for _ in range(8):
            print("NCCL WARN still waiting for rank 3", flush=True)
            time.sleep(0.1)
    """)
    assert len(sink.beats) == 1


def test_steps_in_the_output_and_the_progress_file_are_heartbeats(tmp_path: Path) -> None:
    sink = _run(tmp_path, """
        import os, time
        from pathlib import Path
        for step in range(1, 4):
            print(f"step {step}", flush=True)
            time.sleep(0.2)
        for step in range(4, 7):  # quiet now: the step goes to the progress file
            Path(os.environ["TRAINMASTER_PROGRESS_FILE"]).write_text(str(step))
            time.sleep(0.2)
    """)
    assert len(sink.beats) >= 5
    assert sink.beats == sorted(sink.beats)


def test_the_step_pattern_comes_from_the_environment() -> None:
    config = LaunchConfig.from_env({"TRAINMASTER_STEP_PATTERN": r"it=(\d+)"})
    assert config.step_pattern == r"it=(\d+)"
    assert LaunchConfig.from_env({}).step_pattern == STEP_PATTERN
    assert re.compile(STEP_PATTERN)
    assert os.environ.get("TRAINMASTER_STEP_PATTERN") is None
