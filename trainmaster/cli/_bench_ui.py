"""`trainmaster bench ui`: first paint of each `trainmaster ui` view on a large world."""

from __future__ import annotations

import json
import os
from typing import Annotated

import typer

from trainmaster.cli._bench import bench_app
from trainmaster.cli._console import lazy_console
from trainmaster.errors import UsageError

_out = lazy_console()


@bench_app.command("ui")
def ui_cmd(
    nodes: Annotated[int, typer.Option(help="Nodes of 8 GPUs (20 per leaf, 25 leaves per "
                                       "spine).")] = 10_000,
    jobs: Annotated[int, typer.Option(help="TrainingJobs (a tenth pending).")] = 1_000,
    runs: Annotated[int, typer.Option(help="Fetches per view (the first is cold).")] = 5,
    seed: Annotated[int, typer.Option(help="Seed for the jobs' sizes and node states.")] = 1,
    as_json: Annotated[bool, typer.Option("--json", help="Print only one JSON object.")] = False,
) -> None:
    """Serve the UI on loopback over an in-memory world (no API server) and time each
    view's HTTP round trip and the server's own time (model + render)."""
    from trainmaster.bench import bench_ui

    for name, value in (("--nodes", nodes), ("--jobs", jobs), ("--runs", runs)):
        if value < 1:
            raise UsageError(f"{name} must be at least 1, got {value}")
    results = bench_ui(nodes=nodes, jobs=jobs, runs=runs, seed=seed)
    load = "/".join(f"{x:.2f}" for x in os.getloadavg())
    if as_json:
        print(json.dumps({"nodes": nodes, "jobs": jobs, "runs": runs, "load_average": load,
                          "views": [vars(r) for r in results]}))
        return
    from rich.table import Table

    table = Table(title=f"trainmaster ui on {nodes} nodes, {jobs} jobs ({runs} fetches per "
                  f"view; load average {load})")
    for column in ("view", "path", "first ms", "first CPU ms", "median ms",
                   "server ms (median)", "worst ms", "KiB"):
        table.add_column(column, justify="left" if column in ("view", "path") else "right")
    for r in results:
        table.add_row(r.view, r.path, f"{r.first_ms:.0f}", f"{r.first_cpu_ms:.0f}",
                      f"{r.round_trip_ms:.0f}",
                      f"{r.render_ms:.0f}", f"{r.worst_ms:.0f}", f"{r.bytes / 1024:.0f}")
    _out.print(table)
