"""`trainmaster bench scheduler`: the scheduler benchmark, as a table or one JSON object."""

from __future__ import annotations

import json
from pathlib import Path
from typing import TYPE_CHECKING, Annotated

import typer

if TYPE_CHECKING:
    from rich.table import Table

from trainmaster.cli._app import ContextOpt, app, kubeconfig_for_context, say_target
from trainmaster.cli._console import lazy_console
from trainmaster.errors import UsageError

if TYPE_CHECKING:
    from trainmaster.bench import BenchResult

bench_app = typer.Typer(help="Benchmarks on a real local control plane.", no_args_is_help=True)
app.add_typer(bench_app, name="bench")

_out = lazy_console()
_err = lazy_console(stderr=True, soft_wrap=True)


@bench_app.command("scheduler")
def scheduler_cmd(
    nodes: Annotated[int, typer.Option(help="Nodes of 8 GPUs (5 spines x 5 leaves x 20).")] = 500,
    pods: Annotated[int, typer.Option(help="Pods of 4 GPUs, in gangs of 1..32.")] = 1000,
    seed: Annotated[int, typer.Option(help="Seed for the gang sizes.")] = 1,
    only: Annotated[
        list[str] | None,
        typer.Option("--only", help="Run only this scheduler (repeatable): trainmaster, "
                     "kube-scheduler-nodecisions (the API server's bind limit), "
                     "kube-scheduler-default, kube-scheduler-tuned, "
                     "kube-scheduler-tuned-affinity, bind-ceiling (a same-client "
                     "baseline); trainmaster-upstream (the same gangs as upstream "
                     "scheduling.k8s.io PodGroups) only when named."),
    ] = None,
    kubeconfig: Annotated[
        Path | None,
        typer.Option("--kubeconfig", help="Use this cluster instead of starting one; no "
                     "other scheduler may run there."),
    ] = None,
    context: ContextOpt = None,
    bind_concurrency: Annotated[
        int, typer.Option(help="Binds in flight, for trainmaster and bind-ceiling alike.")
    ] = 64,
    timeout: Annotated[float, typer.Option(help="Seconds before a contender gives up.")] = 600,
    repeat: Annotated[
        int, typer.Option(help="Rounds (the order rotates each round); report each "
                          "scheduler's median time, its range and its worst placement "
                          "figures.")
    ] = 1,
    also_tree: Annotated[
        Path | None,
        typer.Option("--also-tree", help="Also run trainmaster-scheduler from this checkout "
                     "(e.g. a git worktree of an older commit) as one more contender, "
                     "trainmaster@PATH: before and after in one run."),
    ] = None,
    pending: Annotated[
        int, typer.Option(help="The deep-queue variant instead: trainmaster-scheduler with "
                          "this many gangs waiting beyond a full cluster, with the wake-up "
                          "index and with a full pass per event (retryIndex off); CPU per "
                          "cycle and binds per second, empty queue and deep queue.")
    ] = 0,
    as_json: Annotated[bool, typer.Option("--json", help="Print only one JSON object.")] = False,
) -> None:
    """Bind P pending pods on N nodes with each scheduler alone; time and judge them."""
    from trainmaster.bench import BenchOptions, run_scheduler_bench

    # The schedulers under test are processes given a kubeconfig file: --context is a copy.
    kubeconfig = kubeconfig_for_context(kubeconfig, context)
    if kubeconfig is not None:  # an existing cluster: name it (else one is started)
        say_target(kubeconfig, "bench scheduler")
    if pending < 0:
        raise UsageError(f"--pending must be at least 0, got {pending}")
    if pending and (only or also_tree is not None or repeat != 1):
        raise UsageError("--pending runs trainmaster-scheduler only, once: drop --only, "
                         "--also-tree and --repeat")
    options = BenchOptions(nodes=nodes, pods=pods, seed=seed, only=tuple(only or ()),
                           kubeconfig=kubeconfig, bind_concurrency=bind_concurrency,
                           timeout=timeout, repeat=repeat, also_tree=also_tree,
                           pending=pending)
    options.contenders()
    if kubeconfig is None:
        from trainmaster.cli._tools import build_with_progress
        from trainmaster.toolchain import CLUSTER_FAMILIES

        build_with_progress(list(CLUSTER_FAMILIES), why="this benchmark's control plane")
    if pending:
        from trainmaster.cli._bench_deep import print_deep

        print_deep(options, as_json)
        return
    result = run_scheduler_bench(options, report=lambda line: _err.print(line, highlight=False))
    if as_json:
        print(json.dumps(result.to_json()))
        return
    _out.print(results_table(result, seed, repeat))


_LABELS = {"kube-scheduler-nodecisions": "kube-scheduler-nodecisions (limit)",
           "bind-ceiling": "bind-ceiling (same-client baseline)"}


def results_table(result: BenchResult, seed: int, repeat: int) -> Table:
    """The table `bench scheduler` prints: one row per contender."""
    rounds = f", median [min-max] of {repeat} rounds" if repeat > 1 else ""
    load = "/".join(f"{x:.2f}" for x in result.load_average)
    from rich.table import Table  # rich: only when printing
    table = Table(title=f"{result.pods} pods on {result.nodes} nodes (seed {seed}{rounds}; "
                  f"clock from process start; load average {load})")
    for column in ("scheduler", "seconds", "first bind s", "pods/s",
                   "% of limit\n(nodecisions)", "bound", "overcommitted\nnodes",
                   "gangs split\nbeyond needed", "RSS MiB\n(peak)"):
        if column == "scheduler":
            table.add_column(column, no_wrap=True)
        else:
            table.add_column(column, justify="right")
    for r in result.results:
        seconds = f"{r.seconds:.2f}"
        if r.rounds > 1:
            seconds += f" [{r.seconds_min:.2f}-{r.seconds_max:.2f}]"
        percent = "" if r.percent_of_limit is None else f"{r.percent_of_limit:.0f}%"
        table.add_row(_LABELS.get(r.scheduler, r.scheduler), seconds,
                      f"{r.first_bind_seconds:.2f}", f"{r.pods_per_second:.0f}", percent,
                      str(r.bound), str(r.overcommitted_nodes),
                      str(r.gangs_split_beyond_needed), _rss(r.rss_mb, r.peak_rss_mb))
    return table


def _rss(now: float | None, peak: float | None) -> str:
    return "-" if now is None or peak is None else f"{now:.0f} ({peak:.0f})"


@bench_app.command("placement")
def placement_cmd(
    nodes: Annotated[int, typer.Option(help="Nodes of 8 GPUs, half used.")] = 10_000,
    gang: Annotated[int, typer.Option(help="Pods of 4 GPUs in the gang.")] = 64,
    runs: Annotated[int, typer.Option(help="Warm decisions to time.")] = 20,
    cold_runs: Annotated[int, typer.Option(help="Cold decisions (fresh snapshots) to time.")] = 5,
    events: Annotated[int, typer.Option(help="Node events to time under churn.")] = 200,
    pods_per_node: Annotated[
        int, typer.Option(help="Tracked pods per node (10 gives 100,000 at 10,000 nodes).")
    ] = 10,
    also_tree: Annotated[
        Path | None,
        typer.Option("--also-tree", help="Also run this checkout's code (e.g. a git "
                     "worktree of an older commit), alternating with this one's, each in "
                     "its own process; print both and their ratio."),
    ] = None,
    rounds: Annotated[int, typer.Option(help="With --also-tree: runs of each tree.")] = 5,
    queues: Annotated[
        int, typer.Option(help="Also decide with admission through this many queues in a "
                          "cohort tree (fair sharing on), alternating with the flat "
                          "decision; print both and their ratio. 0: off.")
    ] = 0,
    cohort_depth: Annotated[
        int, typer.Option(help="With --queues: cohort levels of the tree.")
    ] = 3,
    as_json: Annotated[bool, typer.Option("--json", help="Print only one JSON object.")] = False,
) -> None:
    """The placement core alone on a large cluster, no API server: cold and warm gang
    decisions, node events under churn, resident memory."""
    from trainmaster.bench import placement_at_scale, placement_microbench

    for name, value in (("--nodes", nodes), ("--gang", gang), ("--runs", runs),
                        ("--cold-runs", cold_runs), ("--events", events)):
        if value < 1:
            raise UsageError(f"{name} must be at least 1, got {value}")
    if pods_per_node < 0:
        raise UsageError(f"--pods-per-node must be 0 or more, got {pods_per_node}")
    if queues and also_tree is not None:
        raise UsageError("--queues and --also-tree are separate comparisons: give one")
    if queues:
        _placement_with_queues(nodes, gang, runs, cold_runs, pods_per_node, queues,
                               cohort_depth, as_json)
        return
    if also_tree is not None:
        if rounds < 1:
            raise UsageError(f"--rounds must be at least 1, got {rounds}")
        _placement_before_after(also_tree, rounds, as_json, {
            "nodes": nodes, "gang": gang, "runs": runs, "cold_runs": cold_runs,
            "events": events, "pods_per_node": pods_per_node})
        return
    scale = placement_at_scale(nodes=nodes, gang=gang, runs=runs, cold_runs=cold_runs,
                               events=events, pods_per_node=pods_per_node)
    if as_json:
        print(json.dumps(scale.to_json()))
        return
    simple = placement_microbench(nodes=nodes, gang=gang, runs=runs)
    from rich.table import Table  # rich: only when printing
    table = Table(title=f"one {gang}-pod gang on {nodes} nodes")
    for column in ("first decision ms", "warm median ms", "warm max ms", "runs", "placed at"):
        table.add_column(column, justify="right")
    table.add_row(f"{simple.cold_ms:.2f}", f"{simple.warm_median_ms:.2f}",
                  f"{simple.warm_max_ms:.2f}", str(simple.runs), simple.level)
    _out.print(table)
    from rich.table import Table  # rich: only when printing
    real = Table(title=f"realistic nodes: {nodes} nodes, {scale.pods} pods, one {gang}-pod "
                 f"gang (median, min-max, ms)")
    for column in ("cold decision", "warm decision", "node event", "node events",
                   "RSS MiB", "placed at"):
        real.add_column(column, justify="right")

    def spread(median: float, bounds: tuple[float, float]) -> str:
        return f"{median:.2f} [{bounds[0]:.2f}-{bounds[1]:.2f}]"

    real.add_row(spread(scale.cold_ms, scale.cold_range_ms),
                 spread(scale.warm_ms, scale.warm_range_ms),
                 spread(scale.node_event_ms, scale.node_event_range_ms),
                 str(scale.node_events), f"{scale.rss_mb:.0f}", scale.level)
    real.add_row(f"CPU {scale.cold_cpu_ms:.2f}", f"CPU {scale.warm_cpu_ms:.2f}",
                 f"CPU {scale.node_event_cpu_ms:.3f}", "", "", "")
    _out.print(real)


def _placement_with_queues(nodes: int, gang: int, runs: int, cold_runs: int,
                           pods_per_node: int, queues: int, depth: int,
                           as_json: bool) -> None:
    from trainmaster.bench import admission_at_scale

    if queues < 2 or depth < 1:
        raise UsageError(f"--queues must be at least 2 and --cohort-depth at least 1, got "
                         f"{queues} and {depth}")
    result = admission_at_scale(nodes=nodes, gang=gang, runs=runs, cold_runs=cold_runs,
                                pods_per_node=pods_per_node, queues=queues, depth=depth)
    if as_json:
        print(json.dumps(result.to_json()))
        return
    from rich.table import Table  # rich: only when printing
    table = Table(title=f"one {gang}-pod gang on {nodes} nodes: flat (no queues) and "
                  f"admitted through {queues} queues under {result.cohorts} cohorts, "
                  f"{depth} levels (median ms)")
    for column in ("measure", "flat", "tree", "tree / flat"):
        table.add_column(column, justify="left" if column == "measure" else "right")
    for key in ("cold_ms", "warm_ms", "cold_cpu_ms", "warm_cpu_ms"):
        table.add_row(key.removesuffix("_ms").replace("_", " "), f"{result.flat[key]:.3f}",
                      f"{result.tree[key]:.3f}", f"{result.ratio(key):.3f}")
    for key in ("admission_ms", "admission_cpu_ms", "cycle_start_ms", "cycle_start_cpu_ms"):
        table.add_row(key.removesuffix("_ms").replace("_", " "), "", f"{result.tree[key]:.3f}",
                      "")
    _out.print(table)


def _placement_before_after(tree: Path, rounds: int, as_json: bool,
                            arguments: dict[str, int]) -> None:
    from trainmaster.bench import placement_before_after

    _err.print(f"{rounds} rounds of this tree and {tree}, alternating", highlight=False)
    compared = placement_before_after(tree, rounds, arguments)
    if as_json:
        print(json.dumps({"tree": str(tree), "rounds": rounds, **arguments,
                          "fields": [c.to_json() for c in compared]}))
        return
    from rich.table import Table  # rich: only when printing
    table = Table(title=f"placement at {arguments['nodes']} nodes, before ({tree}) and "
                  f"after (this tree), {rounds} alternating runs each: median (min-max "
                  "in brackets), ms")
    for column in ("measure", "before", "after", "after / before"):
        table.add_column(column, justify="left" if column == "measure" else "right")
    for c in compared:
        table.add_row(c.field, _spread(c.before), _spread(c.after), f"{c.ratio:.3f}")
    _out.print(table)


def _spread(values: tuple[float, ...]) -> str:
    import statistics

    return f"{statistics.median(values):.3f} [{min(values):.3f}-{max(values):.3f}]"


@bench_app.command("preemption")
def preemption_cmd(
    cases: Annotated[int, typer.Option(help="Generated clusters (4-16 leaves of 4-16 "
                                       "nodes), each with one arriving gang.")] = 200,
    seed: Annotated[int, typer.Option(help="Seed for the generator.")] = 1,
    scale_decisions: Annotated[
        int, typer.Option(help="Decisions to time on the packed 64 x 16 (1,024-node) "
                          "cluster.")
    ] = 20,
    as_json: Annotated[bool, typer.Option("--json", help="Print only one JSON object.")] = False,
) -> None:
    """Domain-freeing preemption against the exact optimum (exhaustive search), the
    greedy order used before it and a naive lowest-priority-first baseline: lost work
    relative to the optimum, unused evictions, decision CPU time. No API server."""
    from trainmaster.bench import run_preemption_bench

    for name, value in (("--cases", cases), ("--scale-decisions", scale_decisions)):
        if value < 1:
            raise UsageError(f"{name} must be at least 1, got {value}")
    result = run_preemption_bench(cases, seed, scale_decisions)
    if as_json:
        print(json.dumps(result.to_json()))
        return
    from rich.table import Table  # rich: only when printing
    table = Table(title=f"preemption: {result.solvable} of {cases} cases solvable, seed "
                  f"{seed}; lost work / exact optimum")
    for column in ("method", "median", "p95", "max", "optimal", "unused pods", "missed",
                   "decision CPU ms (median / p95 / max)"):
        table.add_column(column, justify="right")
    for name, row in result.methods.items():
        timing = (f"{row['decision_cpu_ms_median']:.2f} / {row['decision_cpu_ms_p95']:.2f}"
                  f" / {row['decision_cpu_ms_max']:.2f}"
                  if "decision_cpu_ms_median" in row else "-")
        table.add_row(name, _x(row["ratio_median"]), _x(row["ratio_p95"]),
                      _x(row["ratio_max"]), str(row["optimal_cases"]),
                      str(row["unused_evicted_pods"]), str(row["missed"]), timing)
    _out.print(table)
    scale = result.scale
    _out.print(f"at {scale['nodes']} nodes: {scale['decisions']} decisions "
               f"({scale['found']} found), CPU ms median {scale['cpu_ms_median']:.2f}, "
               f"max {scale['cpu_ms_max']:.2f}")


def _x(ratio: float | None) -> str:
    return "-" if ratio is None else f"{ratio:.3f}x"
