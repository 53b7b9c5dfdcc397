"""`trainmaster bench scheduler` end to end on a small cluster of its own."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

pytestmark = pytest.mark.integration


def _bench_processes(tmp: Path) -> list[str]:
    """Command lines of live processes started for a scheduler benchmark whose temporary
    folders are under `tmp` (its TMPDIR): other tests' benchmarks may run beside it."""
    found = []
    for entry in Path("/proc").iterdir():
        if not entry.name.isdigit():
            continue
        try:
            cmd = (entry / "cmdline").read_bytes().replace(b"\0", b" ").decode(errors="replace")
        except OSError:
            continue
        if f"{tmp}/trainmaster-bench-" in cmd and "pytest" not in cmd:
            found.append(cmd)
    return found


def test_json_run_on_its_own_cluster(tmp_path: Path) -> None:
    # Another benchmark may be running on this machine: only processes under this test's
    # TMPDIR count as ours.
    tmp = tmp_path / "tmp"
    tmp.mkdir()
    env = {**os.environ, "TRAINMASTER_HOME": str(tmp_path / "home"), "TMPDIR": str(tmp)}
    proc = subprocess.run(
        [sys.executable, "-m", "trainmaster", "bench", "scheduler", "--nodes", "40",
         "--pods", "60", "--seed", "3", "--json"],
        capture_output=True, text=True, env=env, timeout=900, check=False,
    )
    assert proc.returncode == 0, proc.stderr[-3000:]
    result = json.loads(proc.stdout)  # stdout is exactly one JSON object
    assert result["nodes"] == 40 and result["pods"] == 60
    names = [r["scheduler"] for r in result["results"]]
    assert names == ["trainmaster", "kube-scheduler-nodecisions", "kube-scheduler-default",
                     "kube-scheduler-tuned", "kube-scheduler-tuned-affinity", "bind-ceiling"]
    assert len(result["load_average"]) == 3
    for row in result["results"]:
        assert set(row) == {"scheduler", "seconds", "pods_per_second", "bound",
                            "overcommitted_nodes", "gangs_split_beyond_needed",
                            "first_bind_seconds", "seconds_min", "seconds_max", "rounds",
                            "percent_of_limit", "rss_mb", "peak_rss_mb"}
        # Each scheduler's own process, read once it had bound every pod; bind-ceiling
        # exits once it has bound them all, so it may be gone by then (null).
        if row["scheduler"] != "bind-ceiling" or row["rss_mb"] is not None:
            assert 0 < row["rss_mb"] <= row["peak_rss_mb"], row
        assert row["bound"] == 60 and row["seconds"] > 0
        assert 0 < row["first_bind_seconds"] <= row["seconds"]
        assert row["percent_of_limit"] > 0
        if row["scheduler"] != "kube-scheduler-nodecisions":  # it checks no capacity
            assert row["overcommitted_nodes"] == 0
    limit = next(r for r in result["results"] if r["scheduler"] == "kube-scheduler-nodecisions")
    assert limit["percent_of_limit"] == 100.0
    assert "starting a local control plane" in proc.stderr
    # the cluster and every contender were stopped
    assert _bench_processes(tmp) == []


def test_unknown_contender_is_an_error_before_anything_starts() -> None:
    proc = subprocess.run(
        [sys.executable, "-m", "trainmaster", "bench", "scheduler", "--only", "volcano"],
        capture_output=True, text=True, timeout=120, check=False,
    )
    assert proc.returncode == 1 and "unknown scheduler 'volcano'" in proc.stderr
