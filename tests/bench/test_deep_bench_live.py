"""`trainmaster bench scheduler --pending` end to end on a small cluster of its own."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

pytestmark = pytest.mark.integration


def test_deep_queue_variant_reports_real_figures_for_both_cycles(tmp_path: Path) -> None:
    env = {**os.environ, "TRAINMASTER_HOME": str(tmp_path / "home")}
    proc = subprocess.run(
        [sys.executable, "-m", "trainmaster", "bench", "scheduler", "--nodes", "50",
         "--pending", "100", "--seed", "3", "--json"],
        capture_output=True, text=True, env=env, timeout=1500, check=False,
    )
    assert proc.returncode == 0, proc.stderr[-3000:]
    result = json.loads(proc.stdout)  # stdout is exactly one JSON object
    assert result["nodes"] == 50 and result["pending"] == 100
    assert len(result["load_average"]) == 3
    assert [(r["variant"], r["retry_index"]) for r in result["runs"]] == [
        ("wake-up index", True), ("full pass per event (retryIndex off)", False)]
    for run in result["runs"]:
        for phase in ("empty", "deep"):
            figures = run[phase]
            assert figures["pods_bound"] > 0, (phase, run)
            assert figures["binds_per_second"] > 0 and figures["seconds"] > 0
            assert figures["cycles"] > 0
            assert 0 < figures["cpu_ms_p50"] <= figures["cpu_ms_p95"], (phase, run)
            assert 0 < figures["seconds_to_half"] <= figures["seconds_to_90pct"] \
                <= figures["seconds"], (phase, run)
            assert figures["report_writes_waited_s"] >= 0
        # the deep phase starts with the waiting gangs queued (most never fit)
        assert run["deep"]["waiting_gangs"] >= 50
        assert run["binds_ratio"] > 0
    assert "starting a local control plane" in proc.stderr
    assert "deep queue:" in proc.stderr
    # each timed step starts once the scheduler's report writes drained
    assert proc.stderr.count("waited for report writes first") == 4
