"""`trainmaster bench recovery`: from a fault to the job's gang running again."""

from __future__ import annotations

import json
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Annotated

import typer

from trainmaster.cli._app import ContextOpt, kubeconfig_for_context, say_target
from trainmaster.cli._bench import bench_app
from trainmaster.cli._bench_torch_elastic import (
    JOB_CHOICES,
    TorchElasticBenchError,
    torch_elastic_rows,
)
from trainmaster.cli._console import lazy_console
from trainmaster.errors import TrainmasterError
from trainmaster.polling import WaitTimeout

if TYPE_CHECKING:
    from trainmaster.drill import RealStack

_out = lazy_console()
_err = lazy_console(stderr=True, soft_wrap=True)


class RecoveryBenchError(TrainmasterError):
    """The recovery benchmark could not run."""


@bench_app.command("recovery")
def recovery_cmd(
    kubeconfig: Annotated[
        Path | None,
        typer.Option("--kubeconfig", help="Use this cluster (kwok nodes of 8 GPUs, the stock "
                     "kube-scheduler running) instead of starting one."),
    ] = None,
    context: ContextOpt = None,
    gang: Annotated[int, typer.Option(help="Pods (nodes) of the TrainingJob.")] = 16,
    repeat: Annotated[int | None, typer.Option(
        help="Runs of each scenario (default 3; 1 with --real or --torch).")] = None,
    scenario: Annotated[
        list[str] | None,
        typer.Option("--scenario", help="Only this scenario (repeatable): pod-failure, "
                     "node-not-ready, missing-heartbeat; with --real: process-kill, "
                     "container-kill, node-not-ready, elastic-shrink and elastic-grow (one "
                     "drill, its own 3-node stack with the job elastic 1..3), and, not run "
                     "unless named, process-hang (SIGSTOP a rank; timed until the "
                     "operator's hang detection has restarted the gang and it trains "
                     "again; the job's hangTimeoutSeconds set to --hang-timeout), hang "
                     "(SIGSTOP a rank; timed to the stalled-job alert) and nic-down (a "
                     "rank's node's rail interface set down: NICHealthy, fence, resume "
                     "elsewhere, NIC alert), both with the monitoring stack."),
    ] = None,
    baseline: Annotated[
        bool, typer.Option(help="Also time a plain Indexed Job under the same faults.")
    ] = True,
    hang_timeout: Annotated[
        int | None, typer.Option(help="The job's hangTimeoutSeconds (>= 10; default 10, "
                                 "with --real 60: a torch worker's start takes longer).")
    ] = None,
    backoff: Annotated[int | None, typer.Option(
        "--backoff", help="With --real: the drilled job's restartPolicy.backoffSeconds for "
        "this run (default: the stack's; 0 times recovery without a deliberate wait).")
    ] = None,
    timeout: Annotated[float, typer.Option(help="Seconds before a run counts as failed.")] = 120,
    as_json: Annotated[bool, typer.Option("--json", help="Print only the JSON rows.")] = False,
    real: Annotated[bool, typer.Option(
        "--real", help="Drill the real training job on real nodes instead (kill its process "
        "or container for real; resume measured from its logs and checkpoints; needs root)."
    )] = False,
    spec: Annotated[Path, typer.Option(
        "--spec", help="With --real: the stack whose job is drilled: the job it places on "
        "the real nodes itself (stacks/demo/cluster.yaml: the PyTorch job lm, in the torch "
        "image), else its CPU job.")] = Path(
        "stacks/dev/cluster.yaml"),
    job: Annotated[str, typer.Option(
        "--job", help="With --real: the job drilled: cpu (the stack's) or torch (the PyTorch "
        "example, elastic 1..2 on two real nodes; elastic-shrink and elastic-grow).")] = "cpu",
    torch: Annotated[bool, typer.Option(
        "--torch", help="Instead: kill a worker of the PyTorch example (examples/transformer) "
        "under the real torchrun, two pods on loopback, no cluster (needs torch: uv sync "
        "--extra torch); time until it trains again, one kill per --repeat.")] = False,
) -> None:
    """Inject pod, node and heartbeat faults into a running 16-pod TrainingJob; time from
    the fault to every pod of the new gang Running with the right resume checkpoint.
    With --real: kill the real training job's process or container on a real node and time
    until every rank trains again, resumed from its last checkpoint."""
    if real and torch:
        raise typer.BadParameter("--torch runs on loopback, without the real nodes: give "
                                 "one of --real and --torch", param_hint="--torch")
    if backoff is not None and (not real or backoff < 0):
        raise typer.BadParameter("give --backoff (>= 0) with --real", param_hint="--backoff")
    if job not in JOB_CHOICES:
        raise typer.BadParameter(f"{job!r}: choose one of {', '.join(JOB_CHOICES)}",
                                 param_hint="--job")
    if job == "torch":
        _real_torch(spec, scenario or [], real, 1 if repeat is None else repeat, as_json)
        return
    if real:
        _real(spec, scenario or [], 1 if repeat is None else repeat, timeout, as_json,
              RealEdits(backoff, 60 if hang_timeout is None else hang_timeout))
        return
    if torch:
        _torch(1 if repeat is None else repeat, as_json)
        return
    from trainmaster.bench import RECOVERY_SCENARIOS as SCENARIOS
    from trainmaster.bench import BenchError, RecoveryOptions
    from trainmaster.bench import run_recovery_bench as run

    hang_timeout = 10 if hang_timeout is None else hang_timeout
    kubeconfig = kubeconfig_for_context(kubeconfig, context)  # a file other processes read
    if kubeconfig is not None:  # an existing cluster: name it (else one is started)
        say_target(kubeconfig, "bench recovery")
    options = RecoveryOptions(kubeconfig=kubeconfig, gang=gang,
                              repeat=3 if repeat is None else repeat,
                              scenarios=tuple(scenario or SCENARIOS), baseline=baseline,
                              hang_timeout=hang_timeout, timeout=timeout)
    try:
        options.check()
        if kubeconfig is None:
            from trainmaster.cli._tools import build_with_progress
            from trainmaster.toolchain import CLUSTER_FAMILIES

            build_with_progress(list(CLUSTER_FAMILIES), why="this benchmark's control plane")
        rows = run(options, report=lambda line: _err.print(line, highlight=False))
    except (BenchError, WaitTimeout) as exc:  # one line, not a traceback
        raise RecoveryBenchError(str(exc)) from None
    if as_json:
        print(json.dumps([r.to_json() for r in rows]))
        return
    from rich.table import Table  # rich: only when printing
    table = Table(title=f"recovery of a {gang}-pod TrainingJob (backoff 0, hang timeout "
                        f"{hang_timeout}s)")
    for column in ("scenario", "detect s", "recover s", "resumed from", "ok"):
        # Only the checkpoint path may fold: names and numbers stay whole in 80 columns.
        table.add_column(column, justify="right" if column.endswith(" s") else "left",
                         no_wrap=column != "resumed from",
                         overflow="fold" if column == "resumed from" else "ellipsis")
    notes: dict[str, str] = {}
    for r in rows:
        ok = "[green]yes[/]" if r.ok else "[red]no[/]"
        if r.note:
            mark = notes.setdefault(r.note, f"({len(notes) + 1})")
            ok += f" {mark}"
        table.add_row(r.scenario, _num(r.detect_seconds), _num(r.recover_seconds),
                      r.resumed_from or "-", ok)
    _out.print(table)
    for note, mark in notes.items():
        _out.print(f"{mark} {note}")


def _torch(repeat: int, as_json: bool) -> None:
    from trainmaster.bench import BenchError, run_torch_loopback_bench

    if repeat < 1:
        raise typer.BadParameter("give at least 1", param_hint="--repeat")
    try:
        rows = run_torch_loopback_bench(repeat, lambda line: _err.print(line, highlight=False))
    except BenchError as exc:
        raise RecoveryBenchError(str(exc)) from None
    if as_json:
        print(json.dumps(rows))
        return
    from rich.table import Table  # rich: only when printing
    table = Table(title="a torchrun worker killed: loopback, two pods on this machine, "
                        "no cluster (not the real nodes)")
    columns = {"training_again_seconds": "again s", "workers_up_seconds": "workers up s",
               "checkpoint_loaded_seconds": "loaded s", "resumed_step": "resumed step",
               "pods_ended": "pods ended", "ok": "ok"}
    for header in columns.values():
        table.add_column(header, justify="right")
    for row in rows:
        table.add_row(*(str(row[key]) for key in columns))
    _out.print(table)
    _out.print(f"target: training again <= {rows[0]['target_seconds']} s after the kill")


def _real_torch(spec: Path, scenarios: list[str], real: bool, repeat: int,
                as_json: bool) -> None:
    from trainmaster.cli._tools import build_with_progress
    from trainmaster.drill import ELASTIC_SCENARIOS
    from trainmaster.toolchain import CLUSTER_FAMILIES, NODE_FAMILIES

    if not real:
        raise typer.BadParameter("the torch job is drilled on real nodes: add --real",
                                 param_hint="--job")
    other = sorted(set(scenarios) - set(ELASTIC_SCENARIOS))
    if other:
        raise typer.BadParameter(
            f"{', '.join(other)}: with --job torch the scenarios are "
            f"{' and '.join(ELASTIC_SCENARIOS)} (one drill)", param_hint="--scenario")
    build_with_progress([*CLUSTER_FAMILIES, *NODE_FAMILIES], why="this benchmark's real nodes")
    try:
        rows = torch_elastic_rows(spec, repeat, lambda line: _err.print(line, highlight=False))
    except TorchElasticBenchError as exc:
        raise RecoveryBenchError(str(exc)) from None
    _print_real(rows, as_json)


def _num(value: float | None) -> str:
    return "-" if value is None else f"{value:.2f}"


HANG = "hang"
NIC_DOWN = "nic-down"
NAMED_ONLY = (HANG, NIC_DOWN)
"""Scenarios run only when named: they need the monitoring stack."""
PROCESS_HANG = "process-hang"
"""Run only when named: it sets the job's hangTimeoutSeconds."""
PROCESS_KILL = "process-kill"


@dataclass(frozen=True)
class RealEdits:
    """What `--real` changes in the drilled job's restartPolicy for the run."""

    backoff_seconds: int | None
    hang_timeout_seconds: int


def _drill_spec(spec: Path, folder: Path, names: list[str], edits: RealEdits,
                report: Callable[[str], None]) -> Path:
    """The stack's spec, or a copy in `folder` with the drilled job's restartPolicy edited
    (--backoff; --hang-timeout for process-hang)."""
    import yaml

    from trainmaster.drill import drilled_job, with_restart_policy

    hang = edits.hang_timeout_seconds if PROCESS_HANG in names else None
    if edits.backoff_seconds is None and hang is None:
        return spec
    job = drilled_job(spec)
    doc = with_restart_policy(yaml.safe_load(spec.read_text()), job, edits.backoff_seconds,
                              hang)
    report(f"{job}: restartPolicy for this run: backoffSeconds "
           f"{edits.backoff_seconds if edits.backoff_seconds is not None else 'as the stack'}"
           f", hangTimeoutSeconds {hang if hang is not None else 'as the stack'}")
    path = folder / spec.name
    path.write_text(yaml.safe_dump(doc, sort_keys=False))
    return path


def _hang_row(stack: RealStack, report: Callable[[str], None], timeout: float
              ) -> dict[str, object]:
    from trainmaster.drill import run_hang, wait_prometheus

    api = wait_prometheus(stack)
    result = run_hang(stack, api, report, timeout)
    return {"scenario": HANG, "alert_seconds": round(result.fired_seconds, 1),
            "threshold_seconds": result.threshold_seconds,
            "ok": result.fired_seconds >= result.threshold_seconds - 10}


def _real(spec: Path, scenarios: list[str], repeat: int, timeout: float, as_json: bool,
          edits: RealEdits) -> None:
    from trainmaster.cli._tools import build_with_progress
    from trainmaster.cluster import ClusterError
    from trainmaster.drill import (
        ELASTIC_SCENARIOS,
        SCENARIOS,
        ensure_scenario,
    )
    from trainmaster.toolchain import CLUSTER_FAMILIES, MONITORING_STACK_FAMILIES, NODE_FAMILIES

    if edits.hang_timeout_seconds < 10:
        raise typer.BadParameter("give 10 or more", param_hint="--hang-timeout")
    names = scenarios or [*(n for n in SCENARIOS if n not in (*NAMED_ONLY, PROCESS_HANG)),
                          *ELASTIC_SCENARIOS]
    elastic = [n for n in names if n in ELASTIC_SCENARIOS]
    names = [n for n in names if n not in ELASTIC_SCENARIOS]
    # The node drill leaves its node fenced: it goes last (nic-down lifts its fence).
    names.sort(key=lambda n: n == "node-not-ready")
    # `hang` (SIGSTOP a rank) is timed to the stalled-job alert and `nic-down` to the NIC
    # alert: they need the monitoring stack (trainmaster/drill/_hang.py, _nic.py).
    hang = any(n in NAMED_ONLY for n in names)
    try:
        for name in names:
            if name != HANG:
                ensure_scenario(name)
    except ClusterError as exc:
        raise typer.BadParameter(str(exc), param_hint="--scenario") from None
    build_with_progress([*CLUSTER_FAMILIES, *NODE_FAMILIES,
                         *(MONITORING_STACK_FAMILIES if hang else ())],
                        why="this benchmark's real nodes")

    def report(line: str) -> None:
        _err.print(line, highlight=False)

    rows: list[dict[str, object]] = []
    if names:
        rows += _rigid_rows(spec, names, repeat, timeout, report, edits, monitoring=hang)
    if elastic:
        rows += _elastic_rows(spec, repeat, report)
    _print_real(rows, as_json)


def _elastic_rows(spec: Path, repeat: int, report: Callable[[str], None]
                  ) -> list[dict[str, object]]:
    """The elastic drill (trainmaster.drill._elastic) on a stack of its own: the spec's
    real job made elastic (min 1, max 3) on three real nodes."""
    import tempfile

    import yaml

    from trainmaster.cluster import ClusterError, down_state_dir
    from trainmaster.drill import make_elastic, run_elastic_drill, start_real_stack
    from trainmaster.drill import placed_on_real_nodes as placed
    from trainmaster.spec import load_spec

    rows: list[dict[str, object]] = []
    doc = yaml.safe_load(spec.read_text())
    loaded = load_spec(spec)
    _, moved = placed(yaml.safe_load(spec.read_text()), loaded.image.reference)
    real = [j for j in loaded.jobs if j.name in moved and j.checkpoint is not None]
    if not real:
        raise RecoveryBenchError(f"{spec}: no job runs the trainmaster image with a checkpoint")
    with tempfile.TemporaryDirectory(prefix="trainmaster-elastic-") as folder:
        path = Path(folder) / spec.name
        path.write_text(yaml.safe_dump(make_elastic(doc, real[0].name, 1, 3), sort_keys=False))
        try:
            stack = start_real_stack(path, 3, report)
        except ClusterError as exc:
            raise RecoveryBenchError(str(exc)) from None
        try:
            for _ in range(repeat):
                for result in run_elastic_drill(stack, report):
                    rows.append(result.row())
        except ClusterError as exc:
            raise RecoveryBenchError(str(exc)) from None
        finally:
            if stack.started:
                down_state_dir(stack.state_dir)
    return rows


def _rigid_rows(spec: Path, names: list[str], repeat: int, timeout: float,
                report: Callable[[str], None], edits: RealEdits, monitoring: bool = False
                ) -> list[dict[str, object]]:
    import tempfile

    from trainmaster.cluster import ClusterError
    from trainmaster.drill import spec_real_images

    with tempfile.TemporaryDirectory(prefix="trainmaster-drill-") as folder:
        try:
            path = _drill_spec(spec, Path(folder), names, edits, report)
            images = spec_real_images(spec)
        except ClusterError as exc:
            raise RecoveryBenchError(str(exc)) from None
        return _stack_rows(path, images, names, repeat, timeout, report, monitoring)


def _stack_rows(spec: Path, images: set[str] | None, names: list[str], repeat: int,
                timeout: float, report: Callable[[str], None], monitoring: bool
                ) -> list[dict[str, object]]:
    from trainmaster.cluster import ClusterError, down_state_dir
    from trainmaster.drill import (
        MOVES_THE_GANG,
        run_drill,
        run_nic_down,
        run_worker_kill,
        serve_demo_datasets,
        start_real_stack,
        wait_prometheus,
    )
    from trainmaster.objects import restarts_container_in_place

    rows: list[dict[str, object]] = []
    try:
        # A gang of whole nodes moves off a NotReady (or fenced) node only if two others
        # are free.
        moves = any(n in MOVES_THE_GANG for n in names)
        stack = start_real_stack(spec, 3 if moves else 2, report, monitoring=monitoring,
                                 job_images=images)
    except ClusterError as exc:
        raise RecoveryBenchError(str(exc)) from None
    try:
        if stack.job.datasets:  # the stack's s3:// datasets (lm reads tinystories)
            serve_demo_datasets(stack.record, stack.spec, report)
        torch = stack.job.launcher == "torchrun"
        in_place = {PROCESS_KILL, *(["container-kill"] if restarts_container_in_place(
            stack.job) else [])} if torch else set()
        if torch:  # its first start (warm-ups, the first `import torch`) takes minutes
            _first_steps(stack, report)
        allowed = stack.job.restart_policy.max_restarts
        if len(names) * repeat > allowed:
            raise RecoveryBenchError(
                f"{len(names) * repeat} drills need as many restarts, but {stack.job.name} "
                f"allows {allowed} (restartPolicy.maxRestarts): lower --repeat")
        after = 0
        for _ in range(repeat):
            for name in names:
                if name == HANG:
                    rows.append(_hang_row(stack, report, timeout))
                    report(f"{name}: {json.dumps(rows[-1])}")
                    continue
                if name in in_place:  # torchrun restarts it, or the kubelet its container
                    inplace = run_worker_kill(stack, report, timeout=timeout, scenario=name)
                    after = max(after, inplace.checkpoint_at_resume or 0)
                    rows.append({**inplace.row(), "scenario": name})
                    report(f"{name}: {json.dumps(rows[-1])}")
                    continue
                if name == NIC_DOWN:
                    nic = run_nic_down(stack, report, wait_prometheus(stack), timeout, after)
                    after = max(after, nic.drill.last_checkpoint_step or 0,
                                nic.drill.checkpoint_at_start or 0)
                    rows.append(nic.row())
                    report(f"{name}: {json.dumps(rows[-1])}")
                    continue
                result = run_drill(stack, name, report, timeout, after)
                after = max(after, result.last_checkpoint_step or 0,
                            result.checkpoint_at_start or 0)
                rows.append(result.row())
                report(f"{name}: {json.dumps(result.row())}")
    except ClusterError as exc:
        raise RecoveryBenchError(str(exc)) from None
    finally:
        if stack.started:
            down_state_dir(stack.state_dir)
    return rows


def _first_steps(stack: RealStack, report: Callable[[str], None]) -> None:
    from trainmaster.drill import wait_torch_training
    from trainmaster.kubeclient import SyncKube

    with SyncKube.connect(stack.kubeconfig) as kube:
        wait_torch_training(stack, kube, report, min_step=1, timeout=1200)


def _print_real(rows: list[dict[str, object]], as_json: bool) -> None:
    if as_json:
        print(json.dumps(rows))
        return
    from rich.table import Table  # rich: only when printing
    table = Table(title="recovery of the real job on real nodes")
    columns = list(dict.fromkeys(k for row in rows for k in row))  # elastic rows add some
    for column in columns:
        table.add_column(column, justify="left" if column == "scenario" else "right")
    for row in rows:
        table.add_row(*(str(row.get(c, "-")) for c in columns))
    _out.print(table)
