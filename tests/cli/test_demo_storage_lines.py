"""The demo's lines for the real nodes' storage interfaces, as tests/test_demo.py parses
them (the counts come from trainmaster.drill.node_storage_traffic, read for real in
tests/cluster/test_real_storage_traffic.py)."""

from __future__ import annotations

import re

from trainmaster.cli._demo import storage_lines
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
