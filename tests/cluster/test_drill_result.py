"""The drill's measure of the checkpoint a restarted gang should resume from, on a real
volume folder: the newest one complete when the new gang's first rank decided."""

from __future__ import annotations

import os
from pathlib import Path
from types import SimpleNamespace
from typing import Any

from trainmaster.drill._drill import _newest_at_decision
from trainmaster.launch._resume import agree


def _complete(folder: Path, step: int, when: float) -> None:
    (folder / f"step-{step}").mkdir()
    marker = folder / f"step-{step}" / "COMPLETE"
    marker.touch()
    os.utime(marker, (when, when))


def test_the_checkpoint_at_start_is_the_newest_complete_before_the_decision(tmp_path: Path
                                                                            ) -> None:
    stack: Any = SimpleNamespace(checkpoints=tmp_path)
    assert _newest_at_decision(stack, "uid-1") is None  # the gang has not decided
    _complete(tmp_path, 220, 1_000)
    _complete(tmp_path, 240, 2_000)  # the dying gang's, after the restart was decided
    decision = agree(tmp_path, "uid-1", str(tmp_path / "step-220"))
    assert (decision.path, decision.step) == (str(tmp_path / "step-240"), 240)
    _complete(tmp_path, 260, 4_000_000_000)  # the new gang's first, after its decision
    assert _newest_at_decision(stack, "uid-1") == 240
