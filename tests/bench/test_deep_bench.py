"""`bench scheduler --pending`: its workload and how it reads the scheduler's metrics
(pure parts); the live run is in test_deep_bench_live.py."""

from __future__ import annotations

import math
import random

from trainmaster.bench._deep import deep_gangs, gangs_holding, same_shapes, seconds_to
from trainmaster.bench._scheduler_metrics import (
    event_histogram,
    parse_metrics,
    quantile,
    report_backlog,
)

METRICS = """# HELP trainmaster_scheduler_cycle_cpu_seconds CPU
trainmaster_scheduler_cycle_cpu_seconds_bucket{le="0.001"} 10.0
trainmaster_scheduler_cycle_cpu_seconds_bucket{le="0.01"} 90.0
trainmaster_scheduler_cycle_cpu_seconds_bucket{le="0.02"} 100.0
trainmaster_scheduler_cycle_cpu_seconds_bucket{le="+Inf"} 100.0
trainmaster_scheduler_cycle_cpu_seconds_count 100.0
trainmaster_scheduler_pending_gangs 42.0
"""


def test_metrics_are_read_as_cumulative_buckets_and_the_pending_gauge() -> None:
    buckets, pending = parse_metrics(METRICS)
    assert buckets == {0.001: 10.0, 0.01: 90.0, 0.02: 100.0, math.inf: 100.0}
    assert pending == 42


def test_cpu_per_event_is_read_apart_from_cpu_per_cycle() -> None:
    text = METRICS + (
        'trainmaster_scheduler_event_cpu_seconds_bucket{le="0.001"} 300.0\n'
        'trainmaster_scheduler_event_cpu_seconds_bucket{le="+Inf"} 310.0\n')
    assert event_histogram(text) == {0.001: 300.0, math.inf: 310.0}
    assert parse_metrics(text)[0] == parse_metrics(METRICS)[0]
    assert event_histogram(METRICS) == {}


def test_quantiles_are_interpolated_over_the_observations_between_two_readings() -> None:
    after, _ = parse_metrics(METRICS)
    before = {0.001: 10.0, 0.01: 10.0, 0.02: 10.0, math.inf: 10.0}
    # 90 new observations: 80 in (1 ms, 10 ms], 10 in (10 ms, 20 ms]
    assert math.isclose(quantile(0.5, before, after), 0.001 + 0.009 * (45 / 80))
    assert math.isclose(quantile(0.95, before, after), 0.01 + 0.01 * (85.5 - 80) / 10)
    assert quantile(0.95, after, after) == 0.0  # nothing observed in between


def test_the_gangs_mix_sizes_gpus_and_levels_and_fill_what_is_asked() -> None:
    rng = random.Random(1)
    gangs = deep_gangs(rng, "d", 400)
    assert {g.gpus for g in gangs} == {4, 8}
    assert {g.pods for g in gangs} == {1, 2, 4, 8, 16, 32}
    assert {(g.level, g.mode) for g in gangs} == {
        ("node", "required"), ("leaf", "required"), ("spine", "required"),
        ("leaf", "preferred")}
    assert all(g.level == "node" for g in gangs if g.pods == 1)
    half = gangs_holding(random.Random(2), "e", 4000)
    held = sum(g.pods * g.gpus for g in half)
    assert 4000 <= held < 4000 + 32 * 8
    assert len({g.name for g in half}) == len(half)
    # The deep step releases what the empty step released: the same shapes, other names.
    twin = same_shapes(half, "b")
    assert [(g.pods, g.gpus, g.level, g.mode) for g in twin] == \
        [(g.pods, g.gpus, g.level, g.mode) for g in half]
    assert not {g.name for g in twin} & {g.name for g in half}


def test_the_report_backlog_is_read_from_its_gauge_and_is_0_without_it() -> None:
    assert report_backlog(METRICS) == 0
    assert report_backlog(METRICS + "trainmaster_scheduler_report_writes_queued 1234.0\n") \
        == 1234


def test_seconds_to_a_share_of_the_binds_counts_from_the_step_start() -> None:
    times = [10.5, 11.0, 12.0, 14.0]  # four binds, the step started at 10
    assert seconds_to(0.5, times, 10.0) == 1.0
    assert seconds_to(0.9, times, 10.0) == 4.0
    assert seconds_to(0.25, times, 10.0) == 0.5
    assert seconds_to(0.9, [], 10.0) == 0.0
