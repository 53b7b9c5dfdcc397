"""`trainmaster bench scheduler`: the scheduler benchmark, as a table or one JSON object."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Annotated

import typer
from rich.console import Console
from rich.table import Table

from trainmaster.cli._app import app

bench_app = typer.Typer(help="Benchmarks on a real local control plane.", no_args_is_help=True)
app.add_typer(bench_app, name="bench")

_out = Console()
_err = Console(stderr=True, soft_wrap=True)


@bench_app.command("scheduler")
def scheduler_cmd(
    nodes: Annotated[int, typer.Option(help="Nodes of 8 GPUs (5 spines x 5 leaves x 20).")] = 500,
    pods: Annotated[int, typer.Option(help="Pods of 4 GPUs, in gangs of 1..32.")] = 1000,
    seed: Annotated[int, typer.Option(help="Seed for the gang sizes.")] = 1,
    only: Annotated[
        list[str] | None,
        typer.Option("--only", help="Run only this scheduler (repeatable): trainmaster, "
                     "kube-scheduler-default, kube-scheduler-tuned, bind-ceiling."),
    ] = None,
    kubeconfig: Annotated[
        Path | None,
        typer.Option("--kubeconfig", help="Use this cluster instead of starting one; no "
                     "other scheduler may run there."),
    ] = None,
    bind_concurrency: Annotated[
        int, typer.Option(help="Binds in flight, for trainmaster and bind-ceiling alike.")
    ] = 64,
    timeout: Annotated[float, typer.Option(help="Seconds before a contender gives up.")] = 600,
    repeat: Annotated[
        int, typer.Option(help="Rounds; report each scheduler's median time and its worst "
                          "placement figures.")
    ] = 1,
    as_json: Annotated[bool, typer.Option("--json", help="Print only one JSON object.")] = False,
) -> None:
    """Bind P pending pods on N nodes with each scheduler alone; time and judge them."""
    from trainmaster.bench import BenchOptions, run_scheduler_bench

    options = BenchOptions(nodes=nodes, pods=pods, seed=seed, only=tuple(only or ()),
                           kubeconfig=kubeconfig, bind_concurrency=bind_concurrency,
                           timeout=timeout, repeat=repeat)
    options.contenders()
    if kubeconfig is None:
        from trainmaster.cli._tools import build_with_progress
        from trainmaster.toolchain import CLUSTER_FAMILIES

        build_with_progress(list(CLUSTER_FAMILIES))
    result = run_scheduler_bench(options, report=lambda line: _err.print(line, highlight=False))
    if as_json:
        print(json.dumps(result.to_json()))
        return
    rounds = f", median of {repeat} rounds" if repeat > 1 else ""
    table = Table(title=f"{result.pods} pods on {result.nodes} nodes (seed {seed}{rounds})")
    for column in ("scheduler", "seconds", "pods/s", "bound", "overcommitted\nnodes",
                   "gangs split\nbeyond needed"):
        if column == "scheduler":
            table.add_column(column, no_wrap=True)
        else:
            table.add_column(column, justify="right")
    for r in result.results:
        table.add_row(r.scheduler, f"{r.seconds:.2f}", f"{r.pods_per_second:.0f}", str(r.bound),
                      str(r.overcommitted_nodes), str(r.gangs_split_beyond_needed))
    _out.print(table)


@bench_app.command("placement")
def placement_cmd(
    nodes: Annotated[int, typer.Option(help="Simulated nodes of 8 GPUs, half used.")] = 10_000,
    gang: Annotated[int, typer.Option(help="Pods of 4 GPUs in the gang.")] = 64,
    runs: Annotated[int, typer.Option(help="Warm decisions to time.")] = 20,
    as_json: Annotated[bool, typer.Option("--json", help="Print only one JSON object.")] = False,
) -> None:
    """The placement core alone: one gang's decision on a large cluster, no API server."""
    from dataclasses import asdict

    from trainmaster.bench import placement_microbench

    result = placement_microbench(nodes=nodes, gang=gang, runs=runs)
    if as_json:
        print(json.dumps(asdict(result)))
        return
    table = Table(title=f"one {gang}-pod gang on {nodes} nodes")
    for column in ("first decision ms", "warm median ms", "warm max ms", "runs", "placed at"):
        table.add_column(column, justify="right")
    table.add_row(f"{result.cold_ms:.2f}", f"{result.warm_median_ms:.2f}",
                  f"{result.warm_max_ms:.2f}", str(result.runs), result.level)
    _out.print(table)
