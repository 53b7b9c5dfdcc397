"""`bench scheduler --pending`: where a timed step's time went (pure parts: /proc/<pid>/stat,
the API server's counters, the deletion rate, the cluster's processes); the live run is
in test_deep_bench_live.py."""

from __future__ import annotations

import os
import subprocess
import sys
import time
from pathlib import Path

import pytest
import yaml

from trainmaster.api import KUBECONFIG_STATE_EXTENSION
from trainmaster.bench._apiserver_metrics import (
    increase,
    open_watches,
    request_counts,
    samples,
    watch_events,
)
from trainmaster.bench._deep import DeepResult, DeepRun, PhaseFigures
from trainmaster.bench._measure import BindWatcher
from trainmaster.bench._proc_cpu import cpu_used, read_cpu
from trainmaster.bench._step_costs import StepCosts, deletion_rate, step_pids
from trainmaster.cli._bench_deep import costs_table
from trainmaster.cluster import ClusterRecord
from trainmaster.cluster._state import ProcessRecord
from trainmaster.procstat import cpu_of, cpu_seconds

# proc(5): pid (comm) state ppid pgrp session tty tpgid flags minflt cminflt majflt
# cmajflt utime stime cutime cstime ...; comm may hold spaces and parentheses
STAT = ("4242 (kube (api) server) S 1 4242 4242 0 -1 4194560 100 0 0 0 "
        "250 130 7 9 20 0 12 0 555 1000000 300 18446744073709551615")


def test_utime_and_stime_are_read_after_the_last_parenthesis() -> None:
    assert cpu_of(STAT, 100) == pytest.approx(3.8)  # (250 + 130) ticks, not cutime
    assert cpu_of(STAT, 1000) == pytest.approx(0.38)
    with pytest.raises(ValueError, match="not a /proc/<pid>/stat line"):
        cpu_of("4242 (short) S 1 2", 100)


def test_a_process_cpu_is_read_from_proc_and_grows_as_it_works() -> None:
    before = cpu_seconds(os.getpid())
    assert before is not None
    deadline = time.process_time() + 0.3
    while time.process_time() < deadline:  # burn 0.3 s of this process's CPU
        pass
    after = cpu_seconds(os.getpid())
    assert after is not None and after - before >= 0.2


def test_a_process_that_is_gone_is_left_out_of_a_reading() -> None:
    child = subprocess.Popen([sys.executable, "-c", "pass"])
    child.wait()  # reaped: its pid names no process now
    reading = read_cpu({"me": os.getpid(), "gone": child.pid})
    assert set(reading) == {"me"} and reading["me"] > 0
    assert cpu_seconds(child.pid) is None


def test_cpu_used_is_the_difference_for_processes_read_both_times() -> None:
    used = cpu_used({"etcd": 10.0, "kwok": 3.0, "gone": 1.0},
                    {"kwok": 4.25, "etcd": 12.5, "new": 9.0})
    assert used == {"etcd": 2.5, "kwok": 1.25}
    assert list(used) == ["etcd", "kwok"]  # sorted by name


def _line(name: str, value: float, **labels: str) -> str:
    """One sample as kube-apiserver writes it (labels sorted)."""
    inner = ",".join(f'{k}="{v}"' for k, v in sorted(labels.items()))
    return f"{name}{{{inner}}} {value:g}"


def _request(verb: str, resource: str, sub: str, code: str, count: float,
             group: str = "", scope: str = "resource") -> str:
    return _line("apiserver_request_total", count, code=code, component="apiserver",
                 dry_run="", group=group, resource=resource, scope=scope,
                 subresource=sub, verb=verb, version="v1")


def _watches(resource: str, scope: str, count: float) -> str:
    return _line("apiserver_longrunning_requests", count, component="apiserver", group="",
                 resource=resource, scope=scope, subresource="", verb="WATCH", version="v1")


APISERVER = "\n".join([
    "# HELP apiserver_request_total [STABLE] Counter of apiserver requests",
    "# TYPE apiserver_request_total counter",
    _request("POST", "pods", "binding", "201", 700),
    _request("POST", "pods", "binding", "409", 5),
    _request("PATCH", "pods", "status", "200", 1200),
    _request("POST", "events", "", "201", 30),
    _request("POST", "events", "", "201", 12, group="events.k8s.io"),
    _request("DELETE", "pods", "", "200", 2, scope="namespace"),  # a collection's
    _request("DELETE", "pods", "", "200", 80),
    'apiserver_request_total_other{verb="POST"} 99',
    'apiserver_request_duration_seconds_bucket{verb="POST",le="0.005"} 3',
    "# HELP apiserver_watch_events_total [BETA] Number of events sent in watch clients",
    _line("apiserver_watch_events_total", 5000, group="", resource="pods", version="v1"),
    _line("apiserver_watch_events_total", 40, group="", resource="nodes", version="v1"),
    _watches("pods", "cluster", 3),
    _watches("pods", "namespace", 2),
    _watches("nodes", "cluster", 4),
]) + "\n"


def test_samples_carry_their_labels_and_only_the_named_metric() -> None:
    found = list(samples(APISERVER, "apiserver_watch_events_total"))
    assert found == [({"group": "", "resource": "pods", "version": "v1"}, 5000.0),
                     ({"group": "", "resource": "nodes", "version": "v1"}, 40.0)]
    escaped = 'm{path="a \\"b\\", c",verb="GET"} 2\n'
    assert list(samples(escaped, "m")) == [({"path": 'a \\"b\\", c', "verb": "GET"}, 2.0)]


def test_requests_are_summed_by_verb_and_resource_over_codes_and_groups() -> None:
    assert request_counts(APISERVER) == {
        "POST pods/binding": 705.0, "PATCH pods/status": 1200.0, "POST events": 42.0,
        "DELETECOLLECTION pods": 2.0, "DELETE pods": 80.0}


def test_watch_events_by_resource_and_the_open_pod_watches() -> None:
    assert watch_events(APISERVER) == {"pods": 5000.0, "nodes": 40.0}
    # an older server labels the watch events by kind
    assert watch_events('apiserver_watch_events_total{group="",kind="Pod",version="v1"} 7\n') \
        == {"Pod": 7.0}
    assert open_watches(APISERVER, "pods") == 5
    assert open_watches(APISERVER, "nodes") == 4
    assert open_watches("", "pods") == 0


def test_the_increase_leaves_out_unchanged_counters_and_survives_a_reset() -> None:
    before = request_counts(APISERVER)
    after = {**before, "POST pods/binding": 905.0, "GET nodes": 3.0,
             "PATCH pods/status": 10.0}  # a restarted server counts from 0
    assert increase(before, after) == {"GET nodes": 3, "PATCH pods/status": 10,
                                       "POST pods/binding": 200}
    assert increase({}, {}) == {}


def test_the_deletion_rate_counts_from_the_step_start_to_the_last_deletion() -> None:
    assert deletion_rate([10.5, 11.0, 12.0, 14.0], 10.0) == (4, 4.0, 1.0)
    assert deletion_rate([], 10.0) == (0, 0.0, 0.0)


def test_the_bind_watcher_times_deletions_without_decoding_them() -> None:
    watcher = BindWatcher(None, "ns", 10)  # type: ignore[arg-type]  # _skip needs no API
    line = (b'{"type":"DELETED","object":{"kind":"Pod","metadata":{"name":"p",'
            b'"uid":"u-1","resourceVersion":"77"}}}\n')
    assert watcher._skip(line) == "77"
    assert len(watcher.deleted_times) == 1
    added = b'{"type":"ADDED","object":{"metadata":{"uid":"u-2","resourceVersion":"78"}}}'
    assert watcher._skip(added) is None and len(watcher.deleted_times) == 1


def test_the_cluster_processes_come_from_the_record_the_kubeconfig_points_at(
        tmp_path: Path) -> None:
    state = tmp_path / "state"
    state.mkdir()
    kubeconfig = tmp_path / "kubeconfig"
    kubeconfig.write_text(yaml.safe_dump({"clusters": [{"name": "c", "cluster": {
        "server": "https://127.0.0.1:1", "extensions": [
            {"name": KUBECONFIG_STATE_EXTENSION, "extension": {"path": str(state)}}]}}]}))
    ClusterRecord("bench", str(state), str(kubeconfig), "", 1, 2, 4, processes=[
        ProcessRecord("etcd", 101, "etcd.log"), ProcessRecord("kube-apiserver", 102, "a.log"),
        ProcessRecord("kwok", 103, "k.log"), ProcessRecord("kwok", 104, "k2.log"),
        ProcessRecord("trainmaster-scheduler", 105, "s.log"),
    ]).save()
    own = {"trainmaster-scheduler": 7, "benchmark": 8}
    assert step_pids(kubeconfig, own) == {
        "trainmaster-scheduler": 7, "benchmark": 8, "etcd": 101, "kube-apiserver": 102,
        "kwok": 103, "kwok#2": 104, "trainmaster-scheduler#2": 105}
    foreign = tmp_path / "other"
    foreign.write_text(yaml.safe_dump({"clusters": [{"name": "c", "cluster": {
        "server": "https://10.0.0.1"}}]}))
    assert step_pids(foreign, own) == own


def _figures(deleted_per_second: float, apiserver_cpu: float) -> PhaseFigures:
    costs = StepCosts(
        load_average_1m=3.5, window_seconds=18.2, act_seconds=6.1,
        cpu_seconds={"etcd": 1.5, "kube-apiserver": apiserver_cpu, "kwok": 2.25,
                     "trainmaster-scheduler": 4.0, "benchmark": 0.75},
        cpu_seconds_in_act={"kube-apiserver": 3.0},
        pods_deleted=640, seconds_to_last_deletion=6.0,
        pods_deleted_per_second=deleted_per_second,
        api_requests={"POST pods/binding": 655, "PATCH pods/status": 1300,
                      "POST events": 17, "DELETECOLLECTION pods": 1, "DELETE pods": 639},
        watch_events={"pods": 9000}, pod_watches=4)
    return PhaseFigures(pods_bound=655, seconds=10.0, binds_per_second=65.5, gpus_bound=4000,
                        gpus_per_second=400.0, cycles=100,
                        cpu_ms_p50=1.0, cpu_ms_p95=7.0, event_cpu_ms_p50=0.2,
                        event_cpu_ms_p95=1.5, waiting_gangs=1990,
                        seconds_to_half=4.0, seconds_to_90pct=9.0,
                        report_writes_waited_s=30.0, costs=costs)


def test_the_costs_table_and_json_show_each_timed_steps_costs() -> None:
    from rich.console import Console

    run = DeepRun("wake-up index", True, _figures(106.7, 9.5), _figures(61.2, 12.25))
    result = DeepResult(1000, 2000, 7, (run,), (3.0, 2.0, 1.0))
    console = Console(record=True, width=220)
    console.print(costs_table(result))
    rows = [line for line in console.export_text().splitlines() if "wake-up index" in line]
    assert len(rows) == 2
    cells = [[c.strip() for c in row.split("│") if c.strip()] for row in rows]
    # step, load, seconds, deleted/s, CPU s of apiserver etcd kwok controller-manager
    # scheduler benchmark, binds, pods/status PATCHes, events, pod DELETEs, watch events
    assert cells[0] == ["wake-up index, empty", "3.5", "18.2", "107", "9.5", "1.5", "2.2",
                        "-", "4.0", "0.8", "655", "1300", "17", "640", "9000"]
    assert cells[1][0] == "wake-up index, deep" and cells[1][3:5] == ["61", "12.2"]
    deep = result.to_json()["runs"][0]["deep"]["costs"]
    assert deep["cpu_seconds"]["kube-apiserver"] == 12.25
    assert deep["api_requests"]["DELETE pods"] == 639 and deep["pod_watches"] == 4
