"""Every `trainmaster bench` subcommand the docs quote runs end to end in its smallest
configuration, and its output has the fields the docs describe: a documented benchmark
cannot rot unnoticed (as `bench recovery` did, whose baseline stopped running)."""

from __future__ import annotations

import json
import os
import re
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest
import yaml

ROOT = Path(__file__).resolve().parents[2]
QUOTED = re.compile(r"trainmaster bench ([a-z]+)( --real)?")


def _quoted() -> set[str]:
    """`bench` subcommands quoted in README.md and docs/ (`recovery --real` apart)."""
    found: set[str] = set()
    for doc in [ROOT / "README.md", *sorted((ROOT / "docs").glob("*.md"))]:
        for sub, real in QUOTED.findall(doc.read_text()):
            found.add(sub + real)
    return found


def _run(args: list[str], home: Path, timeout: float) -> subprocess.CompletedProcess[str]:
    env = {**os.environ, "TRAINMASTER_HOME": str(home)}
    return subprocess.run([sys.executable, "-m", "trainmaster", *args],
                          capture_output=True, text=True, env=env, timeout=timeout,
                          check=False, cwd=ROOT)


def test_every_quoted_bench_has_a_test_that_runs_it() -> None:
    quoted = _quoted()
    assert {"scheduler", "placement", "recovery", "recovery --real", "spec", "job",
            "cluster", "failover"} <= quoted
    tests = "\n".join(p.read_text() for p in (ROOT / "tests").rglob("test_*.py"))
    for sub in sorted(quoted):
        name, _, real = sub.partition(" ")
        call = f'"bench", "{name}"'
        assert call in tests, f"`trainmaster bench {sub}` is documented but no test runs it"
        if real:
            assert re.search(rf'"bench", "{name}", "--real"', tests), sub


def test_bench_spec_smallest(capsys: pytest.CaptureFixture[str]) -> None:
    from trainmaster.cli import main

    assert main(["bench", "spec", "--nodes", "40", "--runs", "1", "--json"]) == 0
    result = json.loads(capsys.readouterr().out)
    assert set(result) == {"nodes", "jobs", "bytes", "seconds_median", "seconds_min",
                           "cpu_seconds_median", "runs"}
    assert result["nodes"] == 40 and result["runs"] == 1 and result["bytes"] > 0
    assert 0 < result["seconds_min"] <= result["seconds_median"]


def test_bench_ui_smallest(tmp_path: Path) -> None:
    proc = _run(["bench", "ui", "--nodes", "40", "--jobs", "10", "--runs", "1", "--json"],
                tmp_path / "home", timeout=300)
    assert proc.returncode == 0, proc.stderr
    result = json.loads(proc.stdout)
    assert (result["nodes"], result["jobs"], result["runs"]) == (40, 10, 1)
    views = {v["view"]: v for v in result["views"]}
    assert {"topology", "leaf", "jobs", "job", "queues", "pending", "pending, warmed",
            "pending, after a change"} <= set(views)
    for view in views.values():
        assert view["bytes"] > 0 and 0 < view["first_cpu_ms"] <= view["first_ms"], view


@pytest.mark.integration
def test_bench_cluster_smallest(tmp_path: Path) -> None:
    from trainmaster.bench._cluster import bench_spec

    spec = tmp_path / "cluster.yaml"
    spec.write_text(yaml.safe_dump(bench_spec(4), sort_keys=False))
    proc = _run(["bench", "cluster", "--spec", str(spec), "--runs", "1", "--json"],
                tmp_path / "home", 600)
    assert proc.returncode == 0, proc.stderr[-3000:]
    result = json.loads(proc.stdout)
    assert result["spec"] == str(spec)
    [run] = result["runs"]
    assert run["nodes"] == 4 and run["seconds"] > 0
    steps: dict[str, float] = run["steps"]
    assert steps and all(v >= 0 for v in steps.values())
    assert sum(steps.values()) <= run["seconds"] + 0.5


def _by_scenario(rows: list[dict[str, Any]]) -> dict[str, dict[str, Any]]:
    for row in rows:
        assert set(row) == {"scenario", "detect_seconds", "recover_seconds", "resumed_from",
                            "ok"}, row
    return {r["scenario"]: r for r in rows}


@pytest.mark.integration
def test_bench_failover_smallest(tmp_path: Path) -> None:
    """Two replicas on 50 nodes: a low client QPS keeps pods pending until each standby
    is ready, so both hand-overs happen; the new leader's first bind follows its Lease."""
    proc = _run(["bench", "failover", "--nodes", "50", "--pods", "100", "--client-qps", "5",
                 "--bind-concurrency", "4", "--json"], tmp_path / "home", 900)
    assert proc.returncode == 0, proc.stderr[-3000:]
    result = json.loads(proc.stdout)
    assert set(result) == {"nodes", "pods", "cold_first_bind_seconds",
                           "lease_duration_seconds", "retry_period_seconds", "load_average",
                           "handovers"}
    assert result["nodes"] == 50 and result["pods"] == 100
    assert result["cold_first_bind_seconds"] > 0
    term, kill = result["handovers"]
    assert (term["signal"], kill["signal"]) == ("SIGTERM", "SIGKILL")
    for row in (term, kill):
        assert 0 < row["pending_at_stop"] <= 100
        # By the API server's audit log: the Lease written to the new holder, then its
        # first Binding stored; the bench's watch of the pods sees that bind no earlier.
        assert 0 < row["lease_seconds"] <= row["first_bind_seconds"]
        assert row["first_bind_seconds"] <= row["first_bind_seen_seconds"] + 0.5
        # The leader's own memory, read from its process before the signal.
        assert 20 < row["leader_rss_mb"] <= row["leader_peak_rss_mb"] < 4096, row
    # Nothing released after a crash: the standby waits for the lease to run out.
    assert kill["lease_seconds"] >= result["lease_duration_seconds"] - result[
        "retry_period_seconds"]
    assert "SIGTERM hand-over" in proc.stderr and "stopping the local control plane" in proc.stderr


@pytest.mark.integration
def test_bench_recovery_smallest(tmp_path: Path) -> None:
    proc = _run(["bench", "recovery", "--gang", "2", "--repeat", "1", "--json"], tmp_path / "home",
                1200)
    assert proc.returncode == 0, proc.stderr[-3000:]
    rows = _by_scenario(json.loads(proc.stdout))
    assert list(rows) == ["pod-failure", "node-not-ready", "missing-heartbeat",
                          "baseline/pod-failure", "baseline/node-not-ready"]
    for scenario in ("pod-failure", "node-not-ready", "missing-heartbeat"):
        row = rows[scenario]
        assert row["ok"] is True, (row, proc.stderr[-3000:])
        assert 0 < row["detect_seconds"] <= row["recover_seconds"]
        assert re.fullmatch(r"/checkpoints/bench/step-\d+", row["resumed_from"]), row
    assert rows["missing-heartbeat"]["detect_seconds"] >= 10  # --hang-timeout 10
    # The baseline runs (it did not, on a fresh machine, when its pods lacked their
    # ServiceAccount): the Job controller replaces the failed index, with no checkpoint...
    failed = rows["baseline/pod-failure"]
    assert failed["ok"] is True and failed["resumed_from"] is None
    assert 0 < failed["detect_seconds"] <= failed["recover_seconds"]
    # ... and nothing moves pods off a NotReady node within the 60 s it is given (they
    # tolerate not-ready for 300 s), as docs/benchmarks.md says.
    node = rows["baseline/node-not-ready"]
    assert node["ok"] is False and node["recover_seconds"] is None


@pytest.mark.integration
@pytest.mark.realnode
@pytest.mark.image
def test_bench_recovery_real_smallest(tmp_path: Path) -> None:
    proc = _run(["bench", "recovery", "--real", "--json", "--scenario", "process-kill"],
                tmp_path / "home", 1800)
    assert proc.returncode == 0, proc.stderr[-3000:]
    [row] = json.loads(proc.stdout)
    base = {"scenario", "detect_seconds", "recover_seconds", "last_checkpoint_step",
            "checkpoint_at_start", "resumed_step", "lost_steps", "ok"}
    # Where the time went (trainmaster.drill._drill): each phase that left a trace.
    phases = {"containers_started_seconds", "workers_up_seconds", "resumed_seconds"}
    assert base <= set(row) <= base | phases, row
    assert "containers_started_seconds" in row and "resumed_seconds" in row, row
    assert row["containers_started_seconds"] <= row["resumed_seconds"] <= \
        row["recover_seconds"], row
    assert row["scenario"] == "process-kill" and row["ok"] is True, row
    assert 0 < row["detect_seconds"] <= row["recover_seconds"]
    assert row["resumed_step"] == row["checkpoint_at_start"] > 0


def test_bench_placement_queues_smallest(capsys: pytest.CaptureFixture[str]) -> None:
    """`bench placement --queues 100 --cohort-depth 3` (docs/benchmarks.md) at its
    smallest size: flat and tree decisions in one run, admission through the tree."""
    from trainmaster.cli import main

    assert main(["bench", "placement", "--nodes", "200", "--gang", "4", "--runs", "2",
                 "--cold-runs", "1", "--queues", "100", "--cohort-depth", "3",
                 "--json"]) == 0
    result = json.loads(capsys.readouterr().out)
    assert (result["nodes"], result["queues"], result["cohort_depth"]) == (200, 100, 3)
    assert result["cohorts"] == 1 + 5 + 25  # 5 children per cohort: 5**3 >= 100
    for side in ("flat", "tree"):
        assert {"cold_ms", "warm_ms", "cold_cpu_ms", "warm_cpu_ms"} <= set(result[side])
    assert result["tree"]["admission_cpu_ms"] > 0 and result["tree"]["cycle_start_ms"] > 0
    assert set(result["tree_over_flat"]) == {"cold_ms", "warm_ms", "cold_cpu_ms",
                                             "warm_cpu_ms"}
    assert main(["bench", "placement", "--queues", "1"]) == 2
    assert "--queues must be at least 2" in capsys.readouterr().err
    assert main(["bench", "placement", "--queues", "100", "--also-tree", "/tmp"]) == 2
    assert "give one" in capsys.readouterr().err


def test_the_bench_tree_admits_its_gang_only_after_weighing_every_waiting_queue() -> None:
    """The tree of `--queues` is a real walk: the gang borrows, all 99 other queues wait
    with gangs their quota admits, and the full pairwise scan (no quick no) reaches the
    same answer, admitted."""
    from trainmaster.bench._admission import BENCH_QUEUE, tree_ledger
    from trainmaster.bench._placement import realistic_gang
    from trainmaster.scheduler import gang_amounts

    ledger, waiting = tree_ledger(200, 100, 3)
    need = gang_amounts(realistic_gang(4, "t"))
    assert len({q for q, _ in waiting}) == 99
    assert all(ledger.quota_refusal(q, n) is None for q, n in waiting)
    assert all(ledger.borrowing(q) for q, _ in waiting)
    assert not ledger.within_nominal(BENCH_QUEUE, need)
    ledger.set_waiting([*waiting, (BENCH_QUEUE, need)])
    assert ledger.refusal(BENCH_QUEUE, need) is None
    ledger._may_yield = lambda node, need: True  # type: ignore[method-assign]
    assert ledger.fair_refusal(BENCH_QUEUE, need) is None
    assert ledger.nodes[BENCH_QUEUE].parent is not None
    depth = sum(1 for _ in ledger.nodes[BENCH_QUEUE].path()) - 1
    assert depth == 3


def test_bench_preemption_smallest(capsys: pytest.CaptureFixture[str]) -> None:
    """`bench preemption` (docs/benchmarks.md) on a few cases: the exhaustive optimum,
    trainmaster's choice, the greedy order of before and the naive baseline; trainmaster
    at the optimum with no unused eviction, the naive baseline evicting pods it does not
    need; bad counts are usage errors."""
    from trainmaster.cli import main

    assert main(["bench", "preemption", "--cases", "12", "--seed", "7",
                 "--scale-decisions", "1", "--json"]) == 0
    result = json.loads(capsys.readouterr().out)
    assert (result["cases"], result["seed"]) == (12, 7) and result["solvable"] >= 1
    ours = result["methods"]["trainmaster"]
    assert ours["ratio_max"] == 1.0 and ours["unused_evicted_pods"] == 0
    assert ours["missed"] == 0 and ours["decision_cpu_ms_max"] > 0
    assert result["methods"]["naive"]["unused_evicted_pods"] > 0
    assert result["methods"]["today"]["ratio_median"] >= 1.0
    assert result["scale"]["nodes"] == 1024 and result["scale"]["found"] == 1
    assert main(["bench", "preemption", "--cases", "3", "--seed", "7",
                 "--scale-decisions", "1"]) == 0
    assert "lost work / exact optimum" in capsys.readouterr().out
    assert main(["bench", "preemption", "--cases", "0"]) == 2
    assert "--cases must be at least 1" in capsys.readouterr().err


def test_the_preemption_bench_optimum_is_exhaustive() -> None:
    """The bench's own exact search against a hand-made case: two leaves, the cheapest
    way is a shrink plus one small gang, not the one cheap big gang."""
    from trainmaster.bench._preemption import Case, Running, naive_answer, optimum, unused_pods

    case = Case(2, 2, [
        Running("big", 0, 1, ((0, 8), (1, 8)), 1000.0),
        Running("el", 1, 0, ((0, 8), (1, 8)), 5000.0, min_pods=1),
    ], 1, 8)
    best = optimum(case)
    # shrinking el (rescale 30 s x 16 GPUs = 480) beats stopping big (1000)
    assert best is not None and best.lost == 480.0 and best.leaf == 1
    assert best.evicted == (("el", (1,)),)
    assert unused_pods(case, best.evicted) == 0
    assert unused_pods(case, (("el", (0, 1)),)) == 1  # a shrink would have done
    naive = naive_answer(case)  # lowest priority first: stops el whole
    assert naive is not None and naive.lost == 5480.0
