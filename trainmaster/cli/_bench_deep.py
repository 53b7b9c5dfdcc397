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


def deep_table(result: DeepResult) -> Table:
    """One row per variant; the empty-queue and deep-queue figures side by side."""
    from rich.table import Table  # rich: only when printing

    load = "/".join(f"{x:.2f}" for x in result.load_average)
    table = Table(title=f"trainmaster-scheduler, {result.pending} gangs waiting on "
                  f"{result.nodes} nodes (seed {result.seed}; CPU ms per cycle from its "
                  f"metrics; load average {load})")
    for column in ("cycle", "empty queue\nbinds/s", "empty queue\nCPU p50 / p95",
                   "deep queue\nbinds/s", "deep queue\nCPU p50 / p95", "deep / empty\nbinds/s",
                   "waiting\n(deep)", "cycles\n(deep)"):
        table.add_column(column, justify="left" if column == "cycle" else "right")
    for run in result.runs:
        empty, deep = run.empty, run.deep
        table.add_row(run.variant, f"{empty.binds_per_second:.0f}",
                      f"{empty.cpu_ms_p50:.1f} / {empty.cpu_ms_p95:.1f}",
                      f"{deep.binds_per_second:.0f}",
                      f"{deep.cpu_ms_p50:.1f} / {deep.cpu_ms_p95:.1f}",
                      f"{run.binds_ratio:.0%}", str(deep.waiting_gangs), str(deep.cycles))
    return table
