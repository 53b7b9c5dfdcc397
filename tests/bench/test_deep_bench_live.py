"""`trainmaster bench scheduler --pending` end to end on a small cluster of its own."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path
from typing import Any

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
            # 4 or 8 GPUs a pod
            assert 4 * figures["pods_bound"] <= figures["gpus_bound"] \
                <= 8 * figures["pods_bound"], (phase, run)
            assert figures["gpus_per_second"] == pytest.approx(  # seconds: rounded
                figures["gpus_bound"] / figures["seconds"], rel=0.01)
            assert figures["cycles"] > 0
            assert 0 < figures["cpu_ms_p50"] <= figures["cpu_ms_p95"], (phase, run)
            # A step's CPU shared among the events it answered: no more than its cycles'.
            assert 0 < figures["event_cpu_ms_p50"] <= figures["event_cpu_ms_p95"], run
            assert figures["event_cpu_ms_p50"] <= figures["cpu_ms_p95"], (phase, run)
            assert 0 < figures["seconds_to_half"] <= figures["seconds_to_90pct"] \
                <= figures["seconds"], (phase, run)
            assert figures["report_writes_waited_s"] >= 0
            _assert_costs(figures)
        # the deep phase starts with the waiting gangs queued (most never fit)
        assert run["deep"]["waiting_gangs"] >= 50
        assert run["binds_ratio"] > 0 and run["gpus_ratio"] > 0
    assert "starting a local control plane" in proc.stderr
    assert "deep queue:" in proc.stderr
    # each timed step starts once the scheduler's report writes drained
    assert proc.stderr.count("waited for report writes first") == 4
    assert proc.stderr.count("pods deleted in") == 4  # and its costs are printed


def _assert_costs(figures: dict[str, Any]) -> None:
    """Where a timed step's time went, read from /proc and the API server's counters."""
    costs = figures["costs"]
    cpu = costs["cpu_seconds"]
    assert {"kube-apiserver", "etcd", "kwok", "trainmaster-scheduler", "benchmark"} <= set(cpu)
    assert cpu["kube-apiserver"] > 0 and cpu["trainmaster-scheduler"] > 0, cpu
    assert all(used >= 0 for used in cpu.values()), cpu
    assert set(costs["cpu_seconds_in_act"]) == set(cpu)
    assert costs["load_average_1m"] >= 0
    assert 0 < costs["act_seconds"] <= costs["window_seconds"]
    # the released pods, deleted on the bench's watch
    assert costs["pods_deleted"] > 0 and costs["pods_deleted_per_second"] > 0, costs
    assert 0 < costs["seconds_to_last_deletion"] <= costs["window_seconds"]
    requests = costs["api_requests"]
    # the release call (and any one-pod DELETE, e.g. kwok's of a pod being deleted)
    assert requests.get("DELETECOLLECTION pods", 0) + requests.get("DELETE pods", 0) >= 1
    assert requests.get("POST pods/binding", 0) >= figures["pods_bound"], requests
    assert costs["watch_events"].get("pods", 0) > 0
    assert costs["pod_watches"] >= 2  # the bench's and the scheduler's
