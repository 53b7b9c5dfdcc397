"""`trainmaster bench queue`: the scheduling cycle with a deep queue, in process, with the
wake-up index and without it (every queued gang tried at every cycle)."""

from __future__ import annotations

import json
from typing import Annotated

import typer

from trainmaster.cli._bench import bench_app
from trainmaster.cli._console import lazy_console
from trainmaster.errors import UsageError

_out = lazy_console()
_err = lazy_console(stderr=True, soft_wrap=True)


@bench_app.command("queue")
def queue_cmd(
    nodes: Annotated[int, typer.Option(help="Nodes of 8 GPUs (leaves of 20, spines of 5 "
                                       "leaves).")] = 1000,
    gangs: Annotated[int, typer.Option(help="Gangs waiting once the cluster is full.")] = 2000,
    events: Annotated[int, typer.Option(help="Events timed with the queue deep (a gang "
                                        "finishes, one arrives).")] = 500,
    seed: Annotated[int, typer.Option(help="Seed for the gangs and their run times.")] = 1,
    as_json: Annotated[bool, typer.Option("--json", help="Print only one JSON object.")] = False,
) -> None:
    """Scheduler CPU per event and pods placed per CPU second, empty queue and deep
    queue, with the wake-up index and without it; no API server."""
    from trainmaster.bench import queue_bench

    if nodes < 20:
        raise UsageError(f"--nodes must be at least 20 (one leaf), got {nodes}")
    for name, value in (("--gangs", gangs), ("--events", events)):
        if value < 1:
            raise UsageError(f"{name} must be at least 1, got {value}")
    result = queue_bench(nodes, gangs, events, seed,
                         report=lambda line: _err.print(line, highlight=False))
    if as_json:
        print(json.dumps(result.to_json()))
        return
    from rich.table import Table  # rich: only when printing
    load = "/".join(f"{x:.2f}" for x in result.load_average)
    table = Table(title=f"{result.gangs} gangs waiting on {result.nodes} nodes, "
                  f"{result.events} events (seed {result.seed}; CPU ms per event; "
                  f"same decisions: {'yes' if result.same_decisions else 'NO'}; "
                  f"load average {load})")
    for column in ("cycle", "empty queue\np50 / p95", "empty queue\npods/CPU s",
                   "deep queue\np50 / p95 / max", "deep queue\npods/CPU s",
                   "deep / empty\npods/CPU s", "gangs tried\nper event"):
        table.add_column(column, justify="right" if column != "cycle" else "left")
    for run in result.runs:
        ratio = (run.deep_pods_per_cpu_second / run.empty_pods_per_cpu_second
                 if run.empty_pods_per_cpu_second else 0.0)
        table.add_row("wake-up index" if run.index else "every gang (before)",
                      f"{run.empty_cpu_ms_p50:.2f} / {run.empty_cpu_ms_p95:.2f}",
                      f"{run.empty_pods_per_cpu_second:.0f}",
                      f"{run.deep_cpu_ms_p50:.2f} / {run.deep_cpu_ms_p95:.2f} / "
                      f"{run.deep_cpu_ms_max:.2f}",
                      f"{run.deep_pods_per_cpu_second:.0f}", f"{ratio:.0%}",
                      f"{run.tried_per_event:.1f}")
    _out.print(table)
