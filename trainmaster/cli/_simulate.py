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



@simulate_app.callback()
def simulate_cmd(
    ctx: typer.Context,
    spec: Annotated[Path | None, typer.Option(
        "--spec", help="Cluster and queues from this spec file; without --trace or "
        "--synthetic, its jobs are the workload.")] = None,
    nodes: Annotated[int | None, typer.Option(
        min=1, help="Cluster of N nodes (8 GPUs, 20 per leaf, 5 leaves per spine).")] = None,
    queues_file: Annotated[Path | None, typer.Option(
        "--queues", help="With --nodes: queues as in a spec's scheduler section "
        "(queues: [...], preemption: true|false). Default: one unlimited queue; with "
        "--spec the spec's scheduler.queues.")] = None,
    trace: Annotated[Path | None, typer.Option(
        "--trace", help="Workload CSV with the columns id, submit_s, duration_s, pods, "
        "gpus_per_pod and optionally queue, priority, topology, min_pods, checkpoint_s.")] = None,
    synthetic: Annotated[bool, typer.Option(
        "--synthetic", help="Generate the workload (see docs/simulate.md).")] = False,
    jobs: Annotated[int, typer.Option(min=1, help="Synthetic jobs.")] = 1000,
    seed: Annotated[int, typer.Option(help="Seed for the synthetic jobs and failures.")] = 1,
    load: Annotated[float, typer.Option(
        help="Synthetic offered load: GPU-seconds of work that can run while the jobs "
        "arrive, per GPU-second of the cluster over that time.")] = 0.9,
    queue_mix: Annotated[str | None, typer.Option(
        "--queue-mix", help="With --synthetic and queues: share of jobs per queue, as "
        "name=weight,... (default: by nominalQuota, else equal).")] = None,
    job_seconds: Annotated[list[str] | None, typer.Option(
        "--job-seconds", help="With --spec's jobs: every job's work in seconds (default "
        "3600), or NAME=SECONDS for one job; repeatable.")] = None,
    submit_every: Annotated[float | None, typer.Option(
        "--submit-every", help="With --spec's jobs: job i (spec order, from 0) is "
        "submitted at i x this many seconds (default 0).")] = None,
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
    compare: Annotated[str | None, typer.Option(
        "--compare", help="KEY=VALUE: run again with this setting changed and print the "
        "difference, e.g. scheduler.preemption=false (docs/simulate.md lists the keys).")
        ] = None,
    jobs_out: Annotated[Path | None, typer.Option(
        "--jobs-out", help="Write one CSV row per job (and policy): queue, submit, start, "
        "end, wait, preemptions, lost GPU-seconds, pods, GPUs, nodes.")] = None,
    preemption_search: Annotated[str, typer.Option(
        help="Victim choice: domain (the scheduler's: least lost work over the domains of "
        "a required level), greedy (the order before it), or compare (each policy twice, "
        "<policy>/domain and <policy>/greedy).")] = "domain",
    report: Annotated[Path | None, typer.Option(
        "--report", help="Write PNG plots and index.html here.")] = None,
    workers: Annotated[int, typer.Option(
        min=0, help="Policy runs at once, each in its own process (same results); 0: one "
        "per CPU.")] = 0,
    as_json: Annotated[bool, typer.Option("--json", help="Print only one JSON object.")] = False,
) -> None:
    """Simulate a workload on a cluster under each placement policy; compare them."""
    if ctx.invoked_subcommand is not None:
        return
    from trainmaster.cli._console import stderr_console, stdout_console

    _out, _err = stdout_console(), stderr_console()
    from trainmaster.simulate import (
        ELASTIC_MODES,
        ElasticModel,
        FaultModel,
        QueueConfig,
        bench_cluster,
        file_queues,
        make_elastic,
        policy_names,
        resolve,
        simulate,
        spec_cluster,
        spec_queues,
    )

    if (spec is None) == (nodes is None):
        raise UsageError("give exactly one of --spec FILE or --nodes N")
    if spec is not None and queues_file is not None:
        raise UsageError("--queues goes with --nodes; with --spec the queues are the "
                                 "spec's scheduler.queues")
    if trace is not None and synthetic:
        raise UsageError("give exactly one of --trace FILE.csv or --synthetic")
    from_spec = trace is None and not synthetic
    if from_spec and spec is None:
        raise UsageError("give exactly one of --trace FILE.csv or --synthetic (or --spec "
                         "FILE alone: its jobs are the workload)")
    if not from_spec and (job_seconds or submit_every is not None):
        raise UsageError("--job-seconds and --submit-every go with --spec's own jobs (no "
                         "--trace, no --synthetic)")
    if queue_mix is not None and not synthetic:
        raise UsageError("--queue-mix goes with --synthetic; a trace names each job's queue")
    if jobs_out is not None and not jobs_out.parent.is_dir():
        raise UsageError(f"--jobs-out {jobs_out}: the directory {jobs_out.parent} does not "
                         "exist")
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
    change = None
    try:
        if compare is not None:
            from trainmaster.simulate import parse_change

            change = parse_change(compare, queues)
        workload = _workload(trace, synthetic, spec, queues, queue_mix, jobs, seed, load,
                             cluster.gpus, cluster.largest_node_gpus, job_seconds or [],
                             submit_every or 0.0)
        if elastic_share:
            workload = make_elastic(workload, elastic_share, seed)
    except ValueError as err:
        raise UsageError(str(err)) from None
    resolve(workload, queues, str(trace) if trace is not None else None)  # names bad rows
    _err.print(f"{len(cluster.nodes)} nodes, {cluster.gpus} GPUs, {len(workload)} jobs "
               f"(loaded in {time.perf_counter() - started:.1f} s); policies: {', '.join(names)}",
               highlight=False)

    def run(queues: QueueConfig, faults: FaultModel) -> Any:
        return simulate(cluster, workload, names, faults, queues=queues,
                        progress=lambda line: _err.print(line, highlight=False),
                        elastic=None if elastic == "off" else model,
                        compare_elastic=elastic == "compare",
                        preemption_search=preemption_search, workers=workers)

    result = run(queues, faults)
    changed = None
    if change is not None:
        from trainmaster.simulate import changed_faults, changed_queues

        _err.print(f"again with {change.label}", highlight=False)
        changed_config = changed_queues(queues, change)
        resolve(workload, changed_config, str(trace) if trace is not None else None)
        changed = run(changed_config, changed_faults(faults, change))
    document = result.to_json()
    if change is not None and changed is not None:
        document["compare"] = _compared(document, change.key, change.value, change.label,
                                        changed.to_json())
    if report is not None:
        from trainmaster.simulate import write_report

        page = write_report(result, report, f"trainmaster simulate: {len(workload)} jobs",
                            document.get("compare"))
        _err.print(f"report: {page}", highlight=False)
    if jobs_out is not None:
        from trainmaster.simulate import write_jobs

        runs = [("base", result)] + ([(change.label, changed)] if change and changed else [])
        written = write_jobs(jobs_out, runs)
        _err.print(f"jobs: {written} rows in {jobs_out}", highlight=False)
    if as_json:
        print(json.dumps(document))
        return
    _print_tables(_out, document, f"{result.jobs} jobs on {result.nodes} nodes "
                  f"({result.gpus} GPUs), simulated in {result.wall_seconds:.1f} s")


def _workload(trace: Path | None, synthetic: bool, spec: Path | None, queues: Any,
              queue_mix: str | None, jobs: int, seed: int, load: float, gpus: int,
              node_gpus: int, job_seconds: list[str], submit_every: float) -> list[Any]:
    """The jobs to replay: the trace, the synthetic workload (spread over the declared
    queues, if any) or the spec's own jobs. A ValueError is a usage error."""
    from trainmaster.simulate import load_trace, synthetic_jobs

    if trace is not None:
        return load_trace(trace)
    if synthetic:
        if not queues.configured:
            if queue_mix is not None:
                raise ValueError("--queue-mix needs queues: give --spec, or --queues with "
                                 "--nodes")
            return synthetic_jobs(jobs, seed, gpus, node_gpus, load)
        from trainmaster.simulate import (
            assign_queues,
            default_mix,
            largest_job,
            parse_queue_mix,
        )

        mix = parse_queue_mix(queue_mix, queues) if queue_mix else default_mix(queues)
        drawn = synthetic_jobs(jobs, seed, gpus, node_gpus, load, largest_job(queues, mix))
        return assign_queues(drawn, queues, mix, seed)
    from trainmaster.simulate import spec_jobs

    assert spec is not None
    return spec_jobs(spec, job_seconds, submit_every)


def _compared(base: dict[str, Any], key: str, value: object, label: str,
              changed: dict[str, Any]) -> dict[str, Any]:
    from trainmaster.simulate import difference

    return {"key": key, "value": value, "change": label,
            "results": changed["results"],
            "difference": [difference(b, c) for b, c in
                           zip(base["results"], changed["results"], strict=True)]}


def _print_tables(out: Any, document: dict[str, Any], title: str) -> None:
    from trainmaster.simulate import (
        DISRUPTIONS,
        ELASTIC,
        FAIRNESS,
        POLICY,
        PREEMPTION,
        QUEUES,
    )

    sides = [("", document["results"], False)]
    compared = document.get("compare")
    if compared is not None:
        label = compared["change"]
        sides = [(" (base)", document["results"], False),
                 (f" ({label})", compared["results"], False),
                 (f" (difference: {label} minus base)", compared["difference"], True)]
    for suffix, results, signed in sides:
        for part in (POLICY, DISRUPTIONS, QUEUES, FAIRNESS, ELASTIC, PREEMPTION):
            table = _table(part, results, signed, suffix,
                           title if part is POLICY and not suffix.startswith(" (d") else "",
                           captions=results is document["results"])
            if table is not None:
                out.print(table)


def _table(part: Any, results: list[dict[str, Any]], signed: bool, suffix: str,
           heading: str, captions: bool) -> Any:
    from rich.table import Table

    from trainmaster.simulate import rows

    title, caption, columns = part
    body = rows(part, results, signed)
    if not body:
        return None
    table = Table(title=f"{heading + chr(10) if heading else ''}{title}{suffix}",
                  caption=(caption or None) if captions else None)
    for key, label, kind in columns:
        table.add_column(label, justify="left" if kind == "text" else "right",
                         no_wrap=True, min_width=11 if key == "policy" else None)
    for row in body:
        table.add_row(*row)
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


