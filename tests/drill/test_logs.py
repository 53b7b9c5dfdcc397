"""Reading what the real job did: CRI log lines and checkpoint folders (no cluster needed)."""

from __future__ import annotations

from pathlib import Path

from trainmaster.drill._logs import RankLog, checkpoint_steps, parse_cri_log


def test_cri_lines_keep_the_runtime_timestamp_and_join_partial_lines() -> None:
    text = (
        "2026-11-30T19:40:00.500000000Z stdout F rank 0: resumed from /ck/step-20 at step 20\n"
        "2026-11-30T19:40:01.250000000Z stdout P rank 0 step 21 "
        "\n2026-11-30T19:40:01.250100000Z stdout F loss 0.5\n"
        "garbage\n"
    )
    lines = parse_cri_log(text)
    assert [ln.text for ln in lines] == [
        "rank 0: resumed from /ck/step-20 at step 20", "rank 0 step 21 loss 0.5"]
    assert abs(lines[1].time - lines[0].time - 0.7501) < 1e-4
    log = RankLog("p", lines)
    assert log.resumed() == ("/ck/step-20", 20)
    assert log.last_step() == 21
    assert [s for _, s in log.steps()] == [21]


def test_only_complete_checkpoints_count(tmp_path: Path) -> None:
    for name in ("step-20", "step-40", "step-60.tmp", "step-100", "other"):
        (tmp_path / name).mkdir()
    for name in ("step-20", "step-100", "step-60.tmp"):
        (tmp_path / name / "COMPLETE").touch()
    assert checkpoint_steps(tmp_path) == [20, 100]
    assert checkpoint_steps(tmp_path / "missing") == []
