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


def _nic_result(**changes: Any) -> Any:
    from trainmaster.drill import DrillResult, Killed, NicDownResult

    killed = Killed("ip link set tm3n1r0 down", "leaf-0-node-1", "dp-example-r0-1-x",
                    device="tm3n1r0")
    drill = DrillResult("nic-down", killed, 0, 20.0, 40.0, 40, 40, "/checkpoints/step-40",
                        43, 60, ("leaf-0-node-0", "leaf-0-node-2"), 40, 1.0)
    fields: dict[str, Any] = dict(
        drill=drill, interface="tm3n1r0", detect_seconds=12.0,
        condition_message="tm3n1r0 down (operstate down, no carrier)", fence_seconds=12.5,
        alert_seconds=80.0, alertmanager_seconds=81.0, cleared_seconds=9.0,
        fenced_after_clear=True, schedulable_after_unfence=True)
    fields.update(changes)
    return NicDownResult(**fields)


def test_a_nic_down_drill_is_ok_only_when_every_step_happened() -> None:
    good = _nic_result()
    assert good.ok
    row = good.row()
    assert (row["scenario"], row["interface"], row["nic_detect_seconds"], row["fence_seconds"],
            row["alert_seconds"], row["ok"]) == ("nic-down", "tm3n1r0", 12.0, 12.5, 80.0, True)
    # The condition must name the interface that went down.
    assert not _nic_result(condition_message="tm3n1r1 down").ok
    # Fenced before the condition said anything: not what the drill checks for.
    assert not _nic_result(fence_seconds=5.0).ok
    # The gang came back on the faulted node: the node was not avoided.
    from trainmaster.drill import DrillResult

    stayed = DrillResult("nic-down", good.drill.killed, 0, 20.0, 40.0, 40, 40, "", 43, 60,
                         ("leaf-0-node-0", "leaf-0-node-1"), 40, 1.0)
    assert not _nic_result(drill=stayed).ok
    # Fencing is sticky: a node unfenced by itself, or not schedulable after unfence, fails.
    assert not _nic_result(fenced_after_clear=False).ok
    assert not _nic_result(schedulable_after_unfence=False).ok


def test_net_dev_counters_are_read_per_interface() -> None:
    from pathlib import Path

    from trainmaster.drill import parse_net_dev

    sample = (
        "Inter-|   Receive                            |  Transmit\n"
        " face |bytes    packets errs drop fifo frame compressed multicast|bytes    packets\n"
        "    lo:     840      10    0    0    0     0          0         0      840      10"
        "    0    0    0     0       0          0\n"
        "  net1: 5123456    4000    0    0    0     0          0         0  6123456     4100"
        "    0    0    0     0       0          0\n")
    assert parse_net_dev(sample) == {"lo": (840, 840), "net1": (5123456, 6123456)}
    # The kernel's own file parses the same way, loopback included.
    mine = parse_net_dev(Path("/proc/self/net/dev").read_text())
    assert "lo" in mine and all(rx >= 0 and tx >= 0 for rx, tx in mine.values())
