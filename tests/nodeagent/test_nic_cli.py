"""`trainmaster node-agent nic`: RDMA ports or plain interfaces, never both."""

from __future__ import annotations

import subprocess
import sys


def test_devices_and_netdevs_together_is_a_usage_error() -> None:
    proc = subprocess.run(
        [sys.executable, "-m", "trainmaster", "node-agent", "nic", "--node", "n0",
         "--devices", "mlx5_0", "--netdevs", "tm0n0r0", "--once"],
        capture_output=True, text=True, timeout=120)
    assert proc.returncode == 2, proc.stderr
    assert "--devices and --netdevs exclude each other" in proc.stderr
    assert "Traceback" not in proc.stderr
