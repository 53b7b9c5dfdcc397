"""`--workers`: the policy runs in forked processes give the same results, in the same
order, as one after the other (only the wall clock differs)."""

from __future__ import annotations

import json
import subprocess
import sys
from typing import Any


def _run(workers: int) -> tuple[dict[str, Any], str]:
    done = subprocess.run(
        [sys.executable, "-m", "trainmaster", "simulate", "--nodes", "60", "--synthetic",
         "--jobs", "300", "--seed", "3", "--node-mtbf-hours", "100",
         "--policy", "trainmaster,first-fit,spread", "--workers", str(workers), "--json"],
        capture_output=True, text=True, timeout=600, check=True)
    return json.loads(done.stdout), done.stderr


def _without_clocks(document: dict[str, Any]) -> list[dict[str, Any]]:
    return [{k: v for k, v in r.items() if k != "wall_seconds"} for r in document["results"]]


def test_forked_policy_runs_give_the_same_results_as_runs_in_turn() -> None:
    in_turn, _ = _run(1)
    forked, progress = _run(3)
    assert [r["policy"] for r in forked["results"]] == ["trainmaster", "first-fit", "spread"]
    assert _without_clocks(forked) == _without_clocks(in_turn)
    assert all(r["jobs_finished"] == 300 for r in forked["results"])
    for policy in ("trainmaster", "first-fit", "spread"):  # each worker reports its end
        assert f"{policy}: 300 jobs in " in progress
