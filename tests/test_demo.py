"""The README's main job works end to end: cluster, scheduler, operator, a recovery."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

from tests.helpers import ROOT

pytestmark = pytest.mark.integration


def _alive(pid: int) -> bool:
    try:
        stat = Path(f"/proc/{pid}/stat").read_text()
    except OSError:
        return False
    return stat.rsplit(")", 1)[1].split()[0] != "Z"


def test_demo_runs_and_down_stops_everything(tmp_path: Path) -> None:
    env = {**os.environ, "TRAINMASTER_HOME": str(tmp_path)}
    env.pop("KUBECONFIG", None)
    state = tmp_path / "clusters" / "dev"
    try:
        proc = subprocess.run([sys.executable, "-m", "trainmaster", "demo"], cwd=ROOT, env=env,
                              capture_output=True, text=True, timeout=600)
        assert proc.returncode == 0, proc.stderr[-3000:]
        assert "recovered: gpt-small lost pod gpt-small-r0-" in proc.stderr
        assert "resuming from /checkpoints/gpt-small/step-1000" in proc.stderr
        assert "Training jobs" in proc.stdout
        record = json.loads((state / "cluster.json").read_text())
        names = [p["name"] for p in record["processes"]]
        assert {"trainmaster-scheduler", "trainmaster-operator"} <= set(names)
        pids = [p["pid"] for p in record["processes"]]
    finally:
        down = subprocess.run([sys.executable, "-m", "trainmaster", "cluster", "down",
                               "--name", "dev"], env=env, capture_output=True, text=True,
                              timeout=120)
    assert down.returncode == 0, down.stderr
    assert not any(_alive(pid) for pid in pids)
