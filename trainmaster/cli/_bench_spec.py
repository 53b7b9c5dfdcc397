"""`trainmaster bench spec` and `trainmaster bench cluster`: how fast a large spec
validates, and how fast a local cluster comes up."""

from __future__ import annotations

import json
import os
import tempfile
from dataclasses import asdict
from pathlib import Path
from typing import Annotated, Any

import typer

from trainmaster.cli._bench import bench_app
from trainmaster.cli._console import lazy_console

_out = lazy_console()
_err = lazy_console(stderr=True, soft_wrap=True)


@bench_app.command("spec")
def spec_cmd(
    nodes: Annotated[int, typer.Option(help="Nodes, listed one by one in the spec.")] = 10_000,
    runs: Annotated[int, typer.Option(help="Timed runs (after one warm-up).")] = 5,
    as_json: Annotated[bool, typer.Option("--json")] = False,
) -> None:
    """Time `load_spec` (parse, schema, model, semantic checks) on a generated large spec."""
    from trainmaster.spec import bench_spec

    bench_spec(nodes, 1)  # warm-up: imports and the cached schema
    result = bench_spec(nodes, runs)
    if as_json:
        print(json.dumps(asdict(result)))
        return
    from rich.table import Table  # rich: only when printing
    table = Table(title=f"validate a {nodes}-node spec ({result.bytes / 1e6:.2f} MB YAML)")
    for col in ("nodes", "jobs", "runs", "median s", "best s", "median CPU s"):
        table.add_column(col, justify="right")
    table.add_row(
        str(result.nodes),
        str(result.jobs),
        str(result.runs),
        f"{result.seconds_median:.3f}",
        f"{result.seconds_min:.3f}",
        f"{result.cpu_seconds_median:.3f}",
    )
    _out.print(table)


@bench_app.command("job")
def job_cmd(
    spec: Annotated[
        Path | None, typer.Option(help="Cluster spec to validate the job against.")
    ] = None,
    nodes: Annotated[
        int, typer.Option(help="Without --spec: a generated spec with this many nodes.")
    ] = 10_000,
    runs: Annotated[int, typer.Option(help="Timed runs of each (after one warm-up).")] = 20,
    as_json: Annotated[bool, typer.Option("--json")] = False,
) -> None:
    """Time validating one TrainingJob against a validated cluster spec (`validate_job`, what
    the operator does per job) and, for comparison, the whole spec again with the job in it."""
    from trainmaster.spec import bench_job, large_spec_text, load_spec, load_spec_text

    cluster = load_spec(spec) if spec is not None else load_spec_text(large_spec_text(nodes))
    result = bench_job(cluster, runs)
    if as_json:
        print(json.dumps({"spec": str(spec) if spec else "generated", **asdict(result)}))
        return
    where = str(spec) if spec is not None else f"a generated {result.nodes}-node spec"
    from rich.table import Table  # rich: only when printing
    table = Table(title=f"validate one job against {where}")
    for col in ("nodes", "runs", "how", "median ms", "best ms"):
        table.add_column(col, justify="right")
    table.add_row(str(result.nodes), str(runs), "whole spec again",
                  f"{result.whole_median * 1e3:.2f}", f"{result.whole_min * 1e3:.2f}")
    table.add_row(str(result.nodes), str(runs), "the job alone",
                  f"{result.job_median * 1e3:.2f}", f"{result.job_min * 1e3:.2f}")
    _out.print(table)
    _out.print(f"median ratio: {result.whole_median / result.job_median:.0f}x")


@bench_app.command("cluster")
def cluster_cmd(
    spec: Annotated[Path, typer.Option(help="Spec whose topology to start.")] = Path(
        "stacks/bench/cluster.yaml"
    ),
    runs: Annotated[int, typer.Option(help="Times to start and stop it.")] = 3,
    as_json: Annotated[bool, typer.Option("--json")] = False,
) -> None:
    """Time `cluster up` (tools already built) until every node is Ready; then `down`."""
    from trainmaster import cluster
    from trainmaster.cli._tools import build_with_progress
    from trainmaster.toolchain import CLUSTER_FAMILIES

    build_with_progress(list(CLUSTER_FAMILIES), why="this benchmark's control plane")
    results: list[dict[str, Any]] = []
    with tempfile.TemporaryDirectory(prefix="tm-bench-cluster-") as home:
        os.environ["TRAINMASTER_HOME"] = home
        for run in range(runs):
            with _err.status(f"run {run + 1}/{runs}") as status:
                result = cluster.up(
                    spec, kube_scheduler=False, report=lambda step: status.update(step)
                )
                cluster.down_state_dir(Path(result.record.state_dir))
            results.append(
                {
                    "seconds": result.seconds,
                    "nodes": result.record.nodes,
                    "steps": dict(result.steps),
                }
            )
    if as_json:
        print(json.dumps({"spec": str(spec), "runs": results}))
        return
    steps = list(results[0]["steps"])
    from rich.table import Table  # rich: only when printing
    table = Table(title=f"cluster up: {results[0]['nodes']} nodes from {spec}")
    table.add_column("run", justify="right")
    table.add_column("total s", justify="right")
    for step in steps:
        table.add_column(step.replace(f" {results[0]['nodes']} nodes", ""), justify="right")
    for i, r in enumerate(results, 1):
        table.add_row(str(i), f"{r['seconds']:.1f}", *(f"{r['steps'][s]:.1f}" for s in steps))
    _out.print(table)
