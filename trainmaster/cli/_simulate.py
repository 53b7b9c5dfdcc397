"""`trainmaster simulate`: replay a workload through the scheduler's core and baselines."""

from __future__ import annotations

import json
import time
from pathlib import Path
from typing import Annotated, Any

import typer

from trainmaster.cli._app import app
from trainmaster.errors import UsageError

simulate_app = typer.Typer(
    help="Discrete-event simulation of a GPU workload under trainmaster's placement and "
    "classic policies (docs/simulate.md).",
    invoke_without_command=True,
)
app.add_typer(simulate_app, name="simulate")



def _fmt(value: float | int | None, digits: int = 0) -> str:
    if value is None:
        return "-"
    return f"{value:.{digits}f}" if isinstance(value, float) else str(value)


@simulate_app.callback()
def simulate_cmd(
    ctx: typer.Context,
    spec: Annotated[Path | None, typer.Option(
        "--spec", help="Cluster from this spec file.")] = None,
    nodes: Annotated[int | None, typer.Option(
        min=1, help="Cluster of N nodes (8 GPUs, 20 per leaf, 5 leaves per spine).")] = None,
    queues_file: Annotated[Path | None, typer.Option(
        "--queues", help="With --nodes: queues as in a spec's scheduler section "
        "(queues: [...], preemption: true|false). Default: one unlimited queue; with "
        "--spec the spec's scheduler.queues.")] = None,
    trace: Annotated[Path | None, typer.Option(
        "--trace", help="Workload CSV: id,submit_s,duration_s,pods,gpus_per_pod"
        "[,queue,priority,topology,min_pods,checkpoint_s].")] = None,
    synthetic: Annotated[bool, typer.Option(
        "--synthetic", help="Generate the workload (see docs/simulate.md).")] = False,
    jobs: Annotated[int, typer.Option(min=1, help="Synthetic jobs.")] = 1000,
    seed: Annotated[int, typer.Option(help="Seed for the synthetic jobs and failures.")] = 1,
    load: Annotated[float, typer.Option(
        help="Synthetic offered load: GPU-seconds of work that can run while the jobs "
        "arrive, per GPU-second of the cluster over that time.")] = 0.9,
    policy: Annotated[str, typer.Option(
        help="trainmaster, first-fit, spread, slurm-tree (comma-separated) or all.")] = "all",
    node_mtbf_hours: Annotated[float | None, typer.Option(
        help="Mean time between failures of one node; none if unset.")] = None,
    repair_minutes: Annotated[float, typer.Option(help="A failed node is back after.")] = 60,
    checkpoint_minutes: Annotated[float, typer.Option(
        help="Jobs checkpoint this often (0: never).")] = 30,
    restart_seconds: Annotated[float, typer.Option(
        help="From a failure to the job queued again.")] = 300,
    elastic: Annotated[str, typer.Option(
        help="trace: jobs with min_pods run elastic; off: every job rigid at pods; "
        "compare: each policy both ways.")] = "trace",
    scaling_exponent: Annotated[float, typer.Option(
        help="Elastic throughput at k of n pods: (k/n)**exponent of full speed "
        "(1: linear).")] = 1.0,
    elastic_share: Annotated[float, typer.Option(
        help="With --synthetic: this share of the multi-pod jobs is elastic, from half "
        "their pods to all.")] = 0.0,
    rescale_seconds: Annotated[float, typer.Option(
        help="Progress lost at each size change of an elastic job.")] = 30.0,
    preemption_search: Annotated[str, typer.Option(
        help="Victim choice: domain (the scheduler's: least lost work over the domains of "
        "a required level), greedy (the order before it), or compare (each policy twice, "
        "<policy>/domain and <policy>/greedy).")] = "domain",
    report: Annotated[Path | None, typer.Option(
        "--report", help="Write PNG plots and index.html here.")] = None,
    as_json: Annotated[bool, typer.Option("--json", help="Print only one JSON object.")] = False,
) -> None:
    """Simulate a workload on a cluster under each placement policy; compare them."""
    if ctx.invoked_subcommand is not None:
        return
    from rich.table import Table

    from trainmaster.cli._console import stderr_console, stdout_console

    _out, _err = stdout_console(), stderr_console()
    from trainmaster.simulate import (
        ELASTIC_MODES,
        ElasticModel,
        FaultModel,
        QueueConfig,
        bench_cluster,
        file_queues,
        load_trace,
        make_elastic,
        policy_names,
        resolve,
        simulate,
        spec_cluster,
        spec_queues,
        synthetic_jobs,
    )

    if (spec is None) == (nodes is None):
        raise UsageError("give exactly one of --spec FILE or --nodes N")
    if spec is not None and queues_file is not None:
        raise UsageError("--queues goes with --nodes; with --spec the queues are the "
                                 "spec's scheduler.queues")
    if (trace is None) == (not synthetic):
        raise UsageError("give exactly one of --trace FILE.csv or --synthetic")
    try:
        names = policy_names(policy)
        faults = FaultModel(node_mtbf_hours, repair_minutes, checkpoint_minutes,
                            restart_seconds, seed)
        model = ElasticModel(scaling_exponent, rescale_seconds)
        if elastic_share and not synthetic:
            raise ValueError("--elastic-share goes with --synthetic; a trace says which "
                             "jobs are elastic in its min_pods column")
        if preemption_search not in ("domain", "greedy", "compare"):
            raise ValueError("--preemption-search must be one of domain, greedy, compare, "
                             f"got {preemption_search!r}")
        if elastic not in ELASTIC_MODES:
            raise ValueError(f"--elastic must be one of {', '.join(ELASTIC_MODES)}, "
                             f"got {elastic!r}")
    except ValueError as err:
        raise UsageError(str(err)) from None
    from trainmaster.spec import SpecReadError

    for named in (trace, queues_file, spec):
        if named is None:
            continue
        try:  # a file that cannot be read is exit 2 whichever option names it
            named.open("rb").close()
        except OSError as exc:
            raise SpecReadError(str(named), f"cannot read the file: {exc.strerror or exc}"
                                ) from None
    started = time.perf_counter()
    cluster = spec_cluster(spec) if spec is not None else bench_cluster(nodes or 0)
    queues = (spec_queues(spec) if spec is not None
              else file_queues(queues_file) if queues_file is not None else QueueConfig())
    workload = (load_trace(trace) if trace is not None
                else synthetic_jobs(jobs, seed, cluster.gpus, cluster.largest_node_gpus, load))
    if elastic_share:
        try:
            workload = make_elastic(workload, elastic_share, seed)
        except ValueError as err:
            raise UsageError(str(err)) from None
    resolve(workload, queues, str(trace) if trace is not None else None)  # names bad rows
    _err.print(f"{len(cluster.nodes)} nodes, {cluster.gpus} GPUs, {len(workload)} jobs "
               f"(loaded in {time.perf_counter() - started:.1f} s); policies: {', '.join(names)}",
               highlight=False)
    result = simulate(cluster, workload, names, faults, queues=queues,
                      progress=lambda line: _err.print(line, highlight=False),
                      elastic=None if elastic == "off" else model,
                      compare_elastic=elastic == "compare",
                      preemption_search=preemption_search)
    if report is not None:
        from trainmaster.simulate import write_report

        page = write_report(result, report, f"trainmaster simulate: {len(workload)} jobs")
        _err.print(f"report: {page}", highlight=False)
    if as_json:
        print(json.dumps(result.to_json()))
        return
    table = Table(title=f"{result.jobs} jobs on {result.nodes} nodes ({result.gpus} GPUs), "
                  f"{result.wall_seconds:.1f} s")
    heads = ("policy", "GPU\nallocation", "wait p50\n(s)", "wait p95\n(s)",
             "wait p95\n64+ GPUs (s)", "JCT mean\n(s)", "gangs split\nbeyond needed",
             "fragmen-\ntation", "preemp-\ntions", "ETTR", "jobs\nfinished")
    table.add_column(heads[0], no_wrap=True, min_width=11)
    for head in heads[1:]:
        table.add_column(head, justify="right")
    for r in result.to_json()["results"]:
        table.add_row(r["policy"], f"{r['gpu_allocation']:.3f}", _fmt(r["wait_p50_s"]),
                      _fmt(r["wait_p95_s"]), _fmt(r["wait_p95_large_s"]),
                      _fmt(r["jct_mean_s"]), str(r["gangs_split_beyond_needed"]),
                      f"{r['fragmentation']:.3f}", str(r["preemptions"]), f"{r['ettr']:.3f}",
                      str(r["jobs_finished"]))
    _out.print(table)
    if queues.configured:
        _out.print(_queue_table(result.to_json()["results"]))
    if any("elastic" in r for r in result.to_json()["results"]):
        _out.print(_elastic_table(result.to_json()["results"]))
    if any("preemption" in r for r in result.to_json()["results"]):
        _out.print(_preemption_table(result.to_json()["results"]))


def _elastic_table(results: list[dict[str, Any]]) -> Any:
    from rich.table import Table

    table = Table(title="elastic jobs (min_pods) and the others")
    for head in ("policy", "elastic\njobs", "their JCT\nmean (s)",
                 "other jobs'\nJCT mean (s)", "rescales"):
        table.add_column(head, justify="left" if head == "policy" else "right", no_wrap=True)
    for r in results:
        e = r.get("elastic")
        if e is not None:
            table.add_row(r["policy"], str(e["jobs"]), _fmt(e["jct_mean_s"]),
                          _fmt(e["rigid_jct_mean_s"]), str(e["rescales"]))
    return table


def _queue_table(results: list[dict[str, Any]]) -> Any:
    from rich.table import Table

    table = Table(title="per queue")
    for head in ("policy", "queue", "nominal\nquota", "jobs", "GPU\nallocation",
                 "wait p50\n(s)", "wait p95\n(s)", "pre-\nempted"):
        table.add_column(head, justify="left" if head in ("policy", "queue") else "right",
                         no_wrap=True)
    for r in results:
        for q in r["queues"]:
            table.add_row(r["policy"], q["queue"], _fmt(q["nominal_quota"]), str(q["jobs"]),
                          f"{q['gpu_allocation']:.3f}", _fmt(q["wait_p50_s"]),
                          _fmt(q["wait_p95_s"]), str(q["preempted"]))
    return table


@simulate_app.command("convert")
def convert_cmd(
    source_format: Annotated[str, typer.Option("--from", help="helios or philly.")],
    source: Annotated[Path, typer.Argument(help="The public job log (not shipped).")],
    target: Annotated[Path, typer.Argument(help="The simulator's trace CSV to write.")],
) -> None:
    """Convert a Helios cluster_log.csv or Philly cluster_job_log to a trace CSV."""
    from trainmaster.simulate import CONVERTERS, convert_trace

    if source_format not in CONVERTERS:
        raise UsageError(f"--from must be one of {', '.join(CONVERTERS)}")
    from trainmaster.cli._console import stderr_console

    _err = stderr_console()
    done = convert_trace(source_format, source, target)
    skipped = ", ".join(f"{n} {why}" for why, n in sorted(done.skipped.items())) or "none"
    _err.print(f"wrote {done.written} jobs to {target}; skipped: {skipped}", highlight=False)


def _preemption_table(results: list[dict[str, Any]]) -> Any:
    from rich.table import Table

    table = Table(title="preemption")
    table.add_column("policy", no_wrap=True)
    for head in ("preemptions", "GPU-hours\nlost", "top-priority\nrequired jobs",
                 "their wait\nmean (s)"):
        table.add_column(head, justify="right")
    for r in results:
        p = r.get("preemption")
        if p is None:
            continue
        table.add_row(r["policy"], str(r["preemptions"]), f"{p['lost_gpu_hours']:.2f}",
                      str(p["required_high_priority_jobs"]),
                      _fmt(p["required_high_priority_wait_mean_s"]))
    return table
