"""`trainmaster bench scheduler --pending P`: the deep-queue variant's table or JSON."""

from __future__ import annotations

import json
from typing import TYPE_CHECKING

from trainmaster.cli._console import lazy_console

if TYPE_CHECKING:
    from rich.table import Table

    from trainmaster.bench import BenchOptions, DeepResult

_out = lazy_console()
_err = lazy_console(stderr=True, soft_wrap=True)


def print_deep(options: BenchOptions, as_json: bool) -> None:
    from trainmaster.bench import run_deep_bench

    result = run_deep_bench(options, report=lambda line: _err.print(line, highlight=False))
    if as_json:
        print(json.dumps(result.to_json()))
        return
    _out.print(deep_table(result))
    _out.print(costs_table(result))


def deep_table(result: DeepResult) -> Table:
    """One row per variant; the empty-queue and deep-queue figures side by side."""
    from rich.table import Table  # rich: only when printing

    load = "/".join(f"{x:.2f}" for x in result.load_average)
    table = Table(title=f"trainmaster-scheduler, {result.pending} gangs waiting on "
                  f"{result.nodes} nodes (seed {result.seed}; CPU ms per cycle and per "
                  f"event from its metrics; load average {load})")
    for column in ("cycle", "empty queue\nbinds/s", "empty queue\nCPU p50 / p95",
                   "deep queue\nbinds/s", "deep queue\nCPU p50 / p95",
                   "deep queue\nper event\np50 / p95", "deep / empty\nbinds/s",
                   "deep / empty\nGPUs/s", "waiting\n(deep)", "cycles\n(deep)"):
        table.add_column(column, justify="left" if column == "cycle" else "right")
    for run in result.runs:
        empty, deep = run.empty, run.deep
        table.add_row(run.variant, f"{empty.binds_per_second:.0f}",
                      f"{empty.cpu_ms_p50:.1f} / {empty.cpu_ms_p95:.1f}",
                      f"{deep.binds_per_second:.0f}",
                      f"{deep.cpu_ms_p50:.1f} / {deep.cpu_ms_p95:.1f}",
                      f"{deep.event_cpu_ms_p50:.2f} / {deep.event_cpu_ms_p95:.2f}",
                      f"{run.binds_ratio:.0%}", f"{run.gpus_ratio:.0%}",
                      str(deep.waiting_gangs), str(deep.cycles))
    return table


_PROCESSES = (("kube-apiserver", "apiserver"), ("etcd", "etcd"), ("kwok", "kwok"),
              ("kube-controller-manager", "controller\nmanager"),
              ("trainmaster-scheduler", "scheduler"), ("benchmark", "benchmark"))
"""Processes whose CPU the costs table shows, and their column titles."""
_REQUESTS = (("POST pods/binding", "binds\nPOST"), ("PATCH pods/status", "pods/status\nPATCH"),
             ("POST events", "events\nPOST"))


def costs_table(result: DeepResult) -> Table:
    """Per timed step: deletions, CPU seconds by process, the API server's requests."""
    from rich.table import Table  # rich: only when printing

    table = Table(title="where each timed step's time went (CPU seconds from /proc over "
                  "the step; requests from the API server's apiserver_request_total)")
    titles = ["cycle, step", "load\n(start)", "window\nseconds", "pods\ndeleted/s",
              *(f"CPU s\n{title}" for _, title in _PROCESSES),
              *(title for _, title in _REQUESTS), "pod\nDELETEs", "pod watch\nevents"]
    for title in titles:
        table.add_column(title, justify="left" if title == "cycle, step" else "right")
    for run in result.runs:
        for step, figures in (("empty", run.empty), ("deep", run.deep)):
            costs = figures.costs
            requests = costs.api_requests
            cpu = [costs.cpu_seconds.get(name) for name, _ in _PROCESSES]
            deletes = requests.get("DELETE pods", 0) + requests.get("DELETECOLLECTION pods", 0)
            table.add_row(f"{run.variant}, {step}", f"{costs.load_average_1m:.1f}",
                          f"{costs.window_seconds:.1f}",
                          f"{costs.pods_deleted_per_second:.0f}",
                          *("-" if used is None else f"{used:.1f}" for used in cpu),
                          *(str(requests.get(key, 0)) for key, _ in _REQUESTS),
                          str(deletes), str(costs.watch_events.get("pods", 0)))
    return table
