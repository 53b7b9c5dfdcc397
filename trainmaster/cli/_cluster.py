"""`trainmaster cluster up|down|status`."""

from __future__ import annotations

import json
import time
from collections.abc import Callable
from dataclasses import asdict
from datetime import UTC, datetime
from pathlib import Path
from typing import TYPE_CHECKING, Annotated

import typer

from trainmaster.cli._app import cluster_app, say_target
from trainmaster.cli._console import lazy_console, stdout_console
from trainmaster.cli._tools import build_with_progress
from trainmaster.errors import UsageError
from trainmaster.toolchain import CLUSTER_FAMILIES, MONITORING_STACK_FAMILIES, NODE_FAMILIES

if TYPE_CHECKING:
    from rich.table import Table

    from trainmaster.cluster import AlertEpisode

_out = lazy_console()
_err = lazy_console(stderr=True, soft_wrap=True)

KubeconfigOpt = Annotated[Path | None, typer.Option("--kubeconfig", help="Kubeconfig path.")]
NameOpt = Annotated[str | None, typer.Option("--name", help="Cluster name (metadata.name).")]


@cluster_app.command("up")
def up_cmd(
    spec: Annotated[Path, typer.Option("--spec", help="Cluster spec whose topology to run.")],
    kubeconfig: Annotated[
        Path | None,
        typer.Option(
            "--kubeconfig", help="Where to write the kubeconfig (default: in the state folder)."
        ),
    ] = None,
    state_dir: Annotated[
        Path | None,
        typer.Option("--state-dir", help="State folder (default: ~/.trainmaster/clusters/<name>)."),
    ] = None,
    apiserver_port: Annotated[
        int | None,
        typer.Option("--apiserver-port", help="Port on 127.0.0.1 (default: a free one)."),
    ] = None,
    kube_scheduler: Annotated[
        bool,
        typer.Option(
            "--kube-scheduler/--no-kube-scheduler",
            help="Run the stock kube-scheduler for pods that are not trainmaster's "
            "(as every real cluster does); benchmarks switch it off.",
        ),
    ] = True,
    real_nodes: Annotated[
        int,
        typer.Option(
            "--real-nodes",
            min=0,
            help="Run the first N spec nodes as real nodes (containerd + runc + kubelet on "
            "this host, root needed); the rest stay simulated by kwok.",
        ),
    ] = 0,
    monitoring: Annotated[
        bool,
        typer.Option(
            "--monitoring",
            help="Also run the Prometheus operator, one Prometheus and one Alertmanager on the "
            "real nodes, configured by the stack's ServiceMonitors, PodMonitor and "
            "PrometheusRule (docs/monitoring.md); needs --real-nodes.",
        ),
    ] = False,
    build: Annotated[bool, typer.Option(help="Build missing tools first.")] = True,
    user_context: Annotated[
        bool,
        typer.Option(
            "--user-context/--no-user-context",
            help="Add context trainmaster-<name> to your kubeconfig ($KUBECONFIG's first "
            "file, else ~/.kube/config) and make it current, as kind does; `cluster down` "
            "removes it. Not with --kubeconfig.",
        ),
    ] = True,
) -> None:
    """Start a local control plane with one simulated node per spec node."""
    from trainmaster import cluster  # heavy (Kubernetes clients): only when used

    if monitoring and not real_nodes:
        raise UsageError("--monitoring runs the stack as pods on real nodes: add --real-nodes N")
    if build:
        build_with_progress(list(CLUSTER_FAMILIES) + (list(NODE_FAMILIES) if real_nodes else [])
                            + (list(MONITORING_STACK_FAMILIES) if monitoring else []),
                            why="`trainmaster cluster up`")
    def start(report: Callable[[str], None]) -> cluster.UpResult:
        return cluster.up(spec, kubeconfig=kubeconfig, state_dir=state_dir,
                          apiserver_port=apiserver_port, kube_scheduler=kube_scheduler,
                          real_nodes=real_nodes, report=report, monitoring=monitoring)

    if _err.is_terminal:
        with _err.status("starting the local cluster") as status:
            result = start(status.update)
    else:  # a log: one plain line per step, as `tools build` prints
        result = start(lambda step: _err.print(f"cluster up: {step}", highlight=False))
    rec = result.record
    if result.already_running:
        _err.print(f"cluster [bold]{rec.name}[/] is already running; nothing started.")
    else:
        _err.print(
            f"cluster [bold]{rec.name}[/] is up in {result.seconds:.1f}s: "
            f"{rec.nodes} nodes Ready ({len(rec.real_nodes)} real), API server https://127.0.0.1:{rec.apiserver_port}"
        )
    if result.steps:
        _err.print("  " + ", ".join(f"{step} {secs:.1f}s" for step, secs in result.steps))
    if user_context and kubeconfig is None:
        merged, context = cluster.add_context(rec)
        _err.print(f"  context {context} is now current in {merged} (kubectl and "
                   f"trainmaster use it; `kubectl config use-context` switches back)")
    _err.print(f"  export KUBECONFIG={rec.kubeconfig}")
    _err.print(f"  trainmaster cluster status --kubeconfig {rec.kubeconfig}")
    _err.print(f"  trainmaster cluster down --kubeconfig {rec.kubeconfig}")


@cluster_app.command("down")
def down_cmd(kubeconfig: KubeconfigOpt = None, name: NameOpt = None) -> None:
    """Stop every process of a local cluster and remove its state."""
    from trainmaster import cluster

    stopped = cluster.down(kubeconfig, name)
    _err.print(
        f"stopped {', '.join(stopped) or 'nothing (no process was recorded)'}; state removed"
    )


@cluster_app.command("import-image")
def import_image_cmd(
    archive: Annotated[Path, typer.Argument(help="OCI layout or docker-save tar.")],
    kubeconfig: KubeconfigOpt = None,
    name: NameOpt = None,
) -> None:
    """Load an image archive into every real node's containerd (no registry needed)."""
    from trainmaster import cluster

    nodes = cluster.import_image(cluster.resolve_state_dir(kubeconfig, name), archive)
    _err.print(f"loaded {archive} into {', '.join(nodes)}")


@cluster_app.command("status")
def status_cmd(
    kubeconfig: KubeconfigOpt = None,
    name: NameOpt = None,
    as_json: Annotated[bool, typer.Option("--json")] = False,
) -> None:
    """The local control plane itself: its processes, node readiness and GPU capacity per
    leaf. For the workload (jobs, queues, pending gangs) on any cluster: `trainmaster
    status`."""
    from trainmaster import cluster

    state_dir = cluster.resolve_state_dir(kubeconfig, name)
    record = cluster.ClusterRecord.load(state_dir)
    if record is not None:
        say_target(Path(record.kubeconfig), "cluster status", f"local cluster {record.name}")
    status = cluster.cluster_status(state_dir)
    if as_json:
        print(json.dumps(asdict(status), indent=2))
        return
    from rich.table import Table  # rich: only when printing
    procs = Table(title=f"cluster {status.name}: processes")
    procs.add_column("process")
    procs.add_column("state")
    for proc, alive in status.processes.items():
        procs.add_row(proc, "[green]running[/]" if alive else "[red]stopped[/]")
    _out.print(procs)
    from rich.table import Table  # rich: only when printing
    leaves = Table(title=f"{status.ready}/{status.nodes} nodes Ready; GPUs per leaf")
    for col in ("leaf", "nodes", "ready", "GPUs", "used", "free"):
        leaves.add_column(col, justify="left" if col == "leaf" else "right")
    for leaf in status.leaves:
        leaves.add_row(
            leaf.leaf,
            str(leaf.nodes),
            str(leaf.ready),
            str(leaf.gpus),
            str(leaf.gpus_used),
            str(leaf.gpus - leaf.gpus_used),
        )
    _out.print(leaves)
    _out.print(f"kubeconfig: {status.kubeconfig}")


@cluster_app.command("monitoring")
def monitoring_cmd(
    kubeconfig: KubeconfigOpt = None,
    name: NameOpt = None,
    namespace: Annotated[str, typer.Option(
        "--namespace", help="Where `cluster up --monitoring` put the stack (the spec's "
        "monitoring.scrapeNamespace).")] = "monitoring",
    since: Annotated[int, typer.Option(
        "--since", help="Minutes of alert history to show (Prometheus' ALERTS series).",
        min=1)] = 60,
) -> None:
    """The live monitoring stack of `cluster up --real-nodes N --monitoring`: Prometheus'
    and Alertmanager's URLs (their pod IPs, reachable from this host), every scrape target
    and its health, the alerts Prometheus evaluates and those that reached Alertmanager,
    and the alert history: every alert that fired in the last --since minutes, from when
    to when."""
    from trainmaster import cluster
    from trainmaster.cluster import endpoints

    state_dir = cluster.resolve_state_dir(kubeconfig, name)
    record = cluster.ClusterRecord.load(state_dir)
    if record is None:
        raise cluster.ClusterError(f"no local cluster at {state_dir}")
    say_target(Path(record.kubeconfig), "cluster monitoring", f"local cluster {record.name}")
    api = endpoints(Path(record.kubeconfig), namespace)
    # Uncut in a pipe or a log (tables at their natural width), fitted on a terminal.
    out = stdout_console()
    out.print(f"Prometheus   {api.prometheus}  (API: /api/v1/targets, /api/v1/alerts)")
    out.print(f"Alertmanager {api.alertmanager}  (API: /api/v2/alerts)")
    from rich.table import Table  # rich: only when printing

    targets = Table(title="scrape targets")
    for col in ("scrape pool", "target", "health", "last error"):
        targets.add_column(col)
    for t in sorted(api.targets(), key=lambda t: (t.pool, t.url)):
        colour = "green" if t.health == "up" else "red"
        targets.add_row(t.pool, t.url, f"[{colour}]{t.health}[/]", t.error)
    out.print(targets)
    alerts = Table(title="alerts: Prometheus (pending, firing) and what reached Alertmanager")
    for col in ("alert", "labels", "state", "since"):
        alerts.add_column(col)

    def shown(labels: dict[str, str]) -> str:
        return ", ".join(f"{k}={v}" for k, v in sorted(labels.items()) if k != "alertname")

    for a in api.alerts():
        alerts.add_row(a["labels"]["alertname"], shown(a["labels"]),
                       f"Prometheus: {a['state']}", a.get("activeAt") or "")
    for a in api.received():
        alerts.add_row(a["labels"]["alertname"], shown(a["labels"]),
                       f"Alertmanager: {a['status']['state']}", a.get("startsAt") or "")
    out.print(alerts)
    out.print(history_table(api.history(since * 60), since))


def history_table(episodes: list[AlertEpisode], since: int) -> Table:
    """The alert history as `cluster monitoring` prints it: one row per firing episode."""
    from rich.table import Table

    def clock(t: float) -> str:
        return datetime.fromtimestamp(t, UTC).strftime("%Y-%m-%d %H:%M:%SZ")

    table = Table(title=f"alert history: firing in the last {since} min (Prometheus ALERTS)")
    for col in ("alert", "labels", "firing from", "until", "for"):
        table.add_column(col)
    now = time.time()
    for e in episodes:
        end = now if e.end is None else e.end
        table.add_row(e.alertname, ", ".join(f"{k}={v}" for k, v in sorted(e.labels.items())),
                      clock(e.start), "still firing" if e.end is None else clock(e.end),
                      f"{end - e.start:.0f}s")
    if not episodes:
        table.add_row("-", "no alert fired", "", "", "")
    return table
