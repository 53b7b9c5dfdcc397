"""`trainmaster bench queue`: the cycle with a deep queue, with the wake-up index and
without it, on the same draw."""

from __future__ import annotations

import json

import pytest

from trainmaster.cli import main


def test_bench_queue_smallest_places_the_same_and_tries_fewer(
        capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["bench", "queue", "--nodes", "40", "--gangs", "60", "--events", "40",
                 "--json"]) == 0
    result = json.loads(capsys.readouterr().out)
    assert set(result) == {"nodes", "gangs", "events", "seed", "same_decisions",
                           "load_average", "runs"}
    assert result["same_decisions"] is True
    indexed, every = result["runs"]
    assert indexed["index"] is True and every["index"] is False
    for run in (indexed, every):
        assert run["deep_events"] == 40 and run["deep_queued_min"] > 20
        assert 0 < run["deep_cpu_ms_p50"] <= run["deep_cpu_ms_p95"] <= run["deep_cpu_ms_max"]
        assert run["empty_pods_per_cpu_second"] > 0
    # Before the index every waiting gang was tried at every event.
    assert every["tried_per_event"] >= every["deep_queued_min"]
    assert indexed["tried_per_event"] < every["tried_per_event"] / 2
    assert indexed["retries"]["wakeups"]["capacity"] > 0


def test_bench_queue_refuses_a_cluster_smaller_than_a_leaf() -> None:
    assert main(["bench", "queue", "--nodes", "5"]) == 2
