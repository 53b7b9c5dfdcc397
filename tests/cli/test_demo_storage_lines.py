"""The demo's lines for the real nodes' storage interfaces and the job's mirrored
checkpoints, as tests/test_demo.py parses
them (the counts come from trainmaster.drill.node_storage_traffic, read for real in
tests/cluster/test_real_storage_traffic.py)."""

from __future__ import annotations

import re

from trainmaster.cli._demo import mirror_lines, storage_lines
from trainmaster.demo import MirrorSeen
from trainmaster.drill import NodeInterfaceBytes


def test_each_node_gets_a_line_with_its_interface_and_bytes() -> None:
    lines = storage_lines((NodeInterfaceBytes("leaf-0-node-0", "tm3n0st", 1_234_567, 8_910),
                           NodeInterfaceBytes("leaf-0-node-1", "tm3n1st", 600_000, 70)))
    assert lines[0].startswith("Bytes through each real node's storage interface")
    rows = {m.group(1): (m.group(2), m.group(3)) for line in lines[1:]
            if (m := re.match(r"^  (\S+) +tm\d+n\d+st +rx +([\d,]+) B  tx +([\d,]+) B$",
                              line))}
    assert rows == {"leaf-0-node-0": ("1,234,567", "8,910"),
                    "leaf-0-node-1": ("600,000", "70")}
    assert all(len(line) <= 140 for line in lines[1:])


MIRROR_ROW = r"^  step (\d+) +([\d,]+) B$"
"""A mirrored checkpoint's line, as tests/test_demo.py parses it."""


def test_the_mirror_gets_a_headline_and_a_line_per_checkpoint_newest_first() -> None:
    lines = mirror_lines("lm", MirrorSeen("s3://checkpoints/lm", (40, 30), (5_400_123, 5_400_001)))
    assert lines[0] == ("Checkpoints of lm mirrored to s3://checkpoints/lm over the storage "
                        "network: 2 complete")
    rows = [m.groups() for line in lines[1:] if (m := re.match(MIRROR_ROW, line))]
    assert rows == [("40", "5,400,123"), ("30", "5,400,001")]
    # The rank's traffic rows are parsed by "rx ... B  tx ... B": a mirror row is not one.
    assert not any(re.match(r"^  (\w+) +.*rx +([\d,]+) B  tx", line) for line in lines)
