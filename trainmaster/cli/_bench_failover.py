"""`trainmaster bench failover`: two scheduler replicas on one Lease; from the leader's
stop to the standby's first bind (SIGTERM and SIGKILL), and one replica's cold start."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Annotated

import typer

from trainmaster.cli._app import ContextOpt, kubeconfig_for_context, say_target
from trainmaster.cli._bench import bench_app
from trainmaster.cli._console import lazy_console
from trainmaster.errors import UsageError

_out = lazy_console()
_err = lazy_console(stderr=True, soft_wrap=True)


@bench_app.command("failover")
def failover_cmd(
    nodes: Annotated[int, typer.Option(help="Nodes of 8 GPUs (5 spines x 5 leaves x 20).")] = 500,
    pods: Annotated[int, typer.Option(help="Pods of 4 GPUs, in gangs of 1..32.")] = 1000,
    seed: Annotated[int, typer.Option(help="Seed for the gang sizes.")] = 1,
    kubeconfig: Annotated[
        Path | None,
        typer.Option("--kubeconfig", help="Use this cluster instead of starting one; no "
                     "other scheduler may run there."),
    ] = None,
    context: ContextOpt = None,
    bind_concurrency: Annotated[int, typer.Option(help="Binds in flight per replica.")] = 64,
    client_qps: Annotated[
        float, typer.Option(help="API requests a second per replica; lower it only to keep "
                            "pods pending on a small cluster until the standby is ready.")
    ] = 5000.0,
    timeout: Annotated[float, typer.Option(help="Seconds for each wait.")] = 300,
    as_json: Annotated[bool, typer.Option("--json", help="Print only one JSON object.")] = False,
) -> None:
    """Leader and standby trainmaster-scheduler: time SIGTERM and SIGKILL hand-overs to
    the standby's first bind, and one replica's process start to its first bind."""
    from trainmaster.bench import FailoverOptions, run_failover_bench

    for name, value in (("--nodes", nodes), ("--pods", pods),
                        ("--bind-concurrency", bind_concurrency)):
        if value < 1:
            raise UsageError(f"{name} must be at least 1, got {value}")
    if client_qps <= 0 or timeout <= 0:
        raise UsageError("--client-qps and --timeout must be above 0")
    kubeconfig = kubeconfig_for_context(kubeconfig, context)
    if kubeconfig is not None:  # an existing cluster: name it (else one is started)
        say_target(kubeconfig, "bench failover")
    if kubeconfig is None:
        from trainmaster.cli._tools import build_with_progress
        from trainmaster.toolchain import CLUSTER_FAMILIES

        build_with_progress(list(CLUSTER_FAMILIES), why="this benchmark's control plane")
    options = FailoverOptions(nodes=nodes, pods=pods, seed=seed, kubeconfig=kubeconfig,
                              bind_concurrency=bind_concurrency, client_qps=client_qps,
                              timeout=timeout)
    result = run_failover_bench(options, report=lambda line: _err.print(line, highlight=False))
    if as_json:
        print(json.dumps(result.to_json()))
        return
    from rich.table import Table  # rich: only when printing
    load = "/".join(f"{x:.2f}" for x in result.load_average)
    table = Table(title=f"{result.pods} pods on {result.nodes} nodes, two replicas (lease "
                  f"{result.lease_duration_seconds:.0f}s, retry {result.retry_period_seconds:.0f}s"
                  f"; load average {load})")
    for column in ("stop", "pods pending", "to Lease s", "to first bind s",
                   "first bind seen s", "leader RSS MiB (peak)"):
        table.add_column(column, justify="left" if column == "stop" else "right")
    table.add_row("cold start (one replica)", str(result.pods), "-",
                  f"{result.cold_first_bind_seconds:.2f}", "-", "-")
    for h in result.handovers:
        memory = ("-" if h.leader_rss_mb is None
                  else f"{h.leader_rss_mb:.0f} ({h.leader_peak_rss_mb or 0:.0f})")
        table.add_row(h.signal, str(h.pending_at_stop), f"{h.lease_seconds:.2f}",
                      f"{h.first_bind_seconds:.2f}", f"{h.first_bind_seen_seconds:.2f}",
                      memory)
    _out.print(table)
