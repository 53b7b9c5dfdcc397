"""The soak's ETTR accounting, from step logs as the kubelet records them (CRI lines):
steps redone after a resume count once, the first step of a run gets its run's step time,
the window clips, and each fault's time to training again and steps lost."""

from __future__ import annotations

from datetime import UTC, datetime

import pytest

from trainmaster.drill import Fault, account, progress_marks, split_runs
from trainmaster.drill._logs import parse_cri_log

T0 = datetime(2026, 12, 5, 12, 0, tzinfo=UTC).timestamp()


def cri(*lines: tuple[float, str]) -> str:
    """CRI log text: (seconds after T0, text) per line."""
    out = []
    for at, text in lines:
        stamp = datetime.fromtimestamp(T0 + at, UTC).strftime("%Y-%m-%dT%H:%M:%S.%f")
        out.append(f"{stamp}000Z stdout F {text}")
    return "\n".join(out) + "\n"


def numpy_run(start: float, joined: float, first: int, last: int, every: float,
              resumed: int | None = None) -> list[tuple[float, str]]:
    """The numpy example's rank 0 (and a rank 1 line, which must not count)."""
    lines = [(joined, "rank 0/2: joined the gang on node-0")]
    if resumed is not None:
        lines.append((joined + 0.5, f"rank 0: resumed from /ck/dp/step-{resumed} at step "
                      f"{resumed}"))
        lines.append((joined + 0.6, f"rank 1: resumed from /ck/dp/step-{resumed} at step "
                      f"{resumed}"))
    for step in range(first, last + 1):
        at = start + every * (step - first)
        lines.append((at, f"rank 0 step {step} loss 0.{step:04d}"))
        lines.append((at + 0.01, f"rank 1 step {step} loss 0.{step:04d}"))
    return lines


def test_steps_redone_after_a_resume_count_once() -> None:
    # Steps 1..50 every 0.5 s, the kill at 26 s, a new gang resumes at checkpoint 40 and
    # logs 41..100 from 42 s: 40 + 60 counted steps of 0.5 s in a 72 s window.
    text = cri(*numpy_run(1, 0, 1, 50, 0.5), *numpy_run(42, 40, 41, 100, 0.5, resumed=40))
    marks = progress_marks(parse_cri_log(text))
    assert len(split_runs(marks)) == 2
    kill = Fault("worker-kill", T0 + 26, "node-1")
    acc = account(marks, [kill], T0, T0 + 72)
    assert acc.steps_counted == 100
    assert acc.productive_seconds == pytest.approx(50.0, abs=1e-3)
    assert acc.ettr == pytest.approx(50 / 72, abs=1e-4)
    assert acc.last_step == 100 and acc.monotone and acc.runs == 2
    (cost,) = acc.faults
    assert cost.restarted
    assert cost.recover_seconds == pytest.approx(16.0, abs=1e-3)
    assert cost.resumed_step == 40 and cost.steps_lost == 10


def test_torchrun_restart_in_place_loses_no_steps() -> None:
    # The torch example: rank 0 prints `step N loss`; a restart in place prints the
    # worker's start line and its resume; the checkpoint was the last step.
    lines = [(0.0, "rank 0 of 2: pid 41, torchrun restart 0, gloo on eth1,eth2")]
    lines += [(1.0 + s, f"step {s} loss 5.{s:04d}") for s in range(1, 31)]
    lines += [(33.0, "rank 1 of 2: pid 77, torchrun restart 1, gloo on eth1,eth2"),
              (33.1, "rank 0 of 2: pid 78, torchrun restart 1, gloo on eth1,eth2"),
              (34.0, "rank 0: resumed from /ck/lm/step-30 at step 30 (world size 2)")]
    lines += [(35.0 + s - 31, f"step {s} loss 4.{s:04d}") for s in range(31, 61)]
    marks = progress_marks(parse_cri_log(cri(*lines)))
    kill = Fault("worker-kill", T0 + 31.5, "node-2")
    acc = account(marks, [kill], T0, T0 + 64)
    (cost,) = acc.faults
    assert cost.steps_lost == 0 and cost.resumed_step == 30
    assert cost.recover_seconds == pytest.approx(3.5, abs=1e-3)
    assert acc.steps_counted == 60
    assert acc.productive_seconds == pytest.approx(60.0, abs=1e-3)
    assert acc.ettr == pytest.approx(60 / 64, abs=1e-4)


def test_the_window_clips_and_a_missed_start_line_still_splits_runs() -> None:
    # No start line for the second run (its log was gone): the step going back splits.
    lines = [(float(s), f"rank 0 step {s} loss 0.1") for s in range(1, 21)]
    lines += [(30.0 + s - 11, f"rank 0 step {s} loss 0.1") for s in range(11, 31)]
    marks = progress_marks(parse_cri_log(cri(*lines)))
    runs = split_runs(marks)
    assert [len(steps) for _, steps in runs] == [20, 20]
    acc = account(marks, [Fault("container-kill", T0 + 20.5)], T0 + 5.5, T0 + 40)
    # Counted: steps 6..10 of the first run (step 6's second clipped to its half after
    # 5.5 s, 7..10 whole) and 11..21 of the second, logged 30..40 s (11 steps, 1 s each).
    assert acc.productive_seconds == pytest.approx(0.5 + 4 + 11, abs=1e-3)
    assert acc.faults[0].steps_lost == 10 and acc.faults[0].resumed_step == 10
    assert acc.faults[0].recover_seconds == pytest.approx(9.5, abs=1e-3)
    assert 0 < acc.ettr <= 1


def test_a_fault_the_job_trains_through_and_one_never_recovered() -> None:
    lines = [(float(s), f"step {s} loss 1.0") for s in range(1, 41)]
    marks = progress_marks(parse_cri_log(cri(*lines)))
    acc = account(marks, [Fault("nic-down", T0 + 10.2), Fault("node-loss", T0 + 40.5)],
                  T0, T0 + 50)
    through, never = acc.faults
    assert not through.restarted and through.steps_lost == 0
    assert through.recover_seconds == pytest.approx(0.8, abs=1e-3)
    assert never.recover_seconds is None
    assert acc.ettr == pytest.approx(40 / 50, abs=1e-4)


def test_a_skipped_step_is_not_monotone() -> None:
    lines = [(1.0, "step 1 loss 1"), (2.0, "step 2 loss 1"), (3.0, "step 4 loss 1")]
    acc = account(progress_marks(parse_cri_log(cri(*lines))), [], T0, T0 + 3)
    assert not acc.monotone


def test_the_last_faults_recovery_is_timed_after_the_window_which_it_does_not_widen() -> None:
    # The soak ends at 30 s, 5 s after a fault; the job trains again at 40 s (the soak
    # waits for it): the fault gets its figures, the ETTR counts only the 30 s window.
    lines = [(float(s), f"rank 0 step {s} loss 0.1") for s in range(1, 26)]
    lines += [(38.0, "rank 0/2: joined the gang"),
              (39.0, "rank 0: resumed from /ck/dp/step-20 at step 20")]
    lines += [(40.0 + s - 21, f"rank 0 step {s} loss 0.1") for s in range(21, 31)]
    marks = progress_marks(parse_cri_log(cri(*lines)))
    acc = account(marks, [Fault("nic-down", T0 + 25.5)], T0, T0 + 30)
    (cost,) = acc.faults
    assert cost.restarted and cost.resumed_step == 20 and cost.steps_lost == 5
    assert cost.recover_seconds == pytest.approx(14.5, abs=1e-3)
    assert acc.steps_counted == 25 and acc.last_step == 25
    assert acc.productive_seconds == pytest.approx(25.0, abs=1e-3)
    assert acc.ettr == pytest.approx(25 / 30, abs=1e-4)
