"""`trainmaster ui`: the live web view of a cluster (trainmaster.ui, docs/ui.md)."""

from __future__ import annotations

import asyncio
import contextlib
import os
import sys
from collections.abc import Mapping
from pathlib import Path
from typing import Annotated

import typer

from trainmaster.cli._app import ClusterOpt, ContextOpt, KubeconfigOpt, app, say_target
from trainmaster.errors import UsageError


@app.command("ui")
def ui(
    host: Annotated[
        str, typer.Option(help="Address to listen on (loopback by default: the views show "
                          "the whole cluster's workload; bind wider only behind your own "
                          "access control).")
    ] = "127.0.0.1",
    port: Annotated[int, typer.Option(help="TCP port (0: any free port).")] = 8080,
    in_cluster: Annotated[
        bool, typer.Option("--in-cluster", help="Run as the in-cluster Deployment does "
                           "(`ui.enabled`): the pod's ServiceAccount, listening on every "
                           "address of the pod (0.0.0.0). Refused outside a pod.")
    ] = False,
    jobs_namespace: Annotated[
        list[str] | None, typer.Option(metavar="NAMESPACE", help="Watch TrainingJobs in "
                                       "this namespace only (repeat for more; default: all).")
    ] = None,
    events_namespace: Annotated[
        list[str] | None, typer.Option(metavar="NAMESPACE", help="Watch Events in this "
                                       "namespace only (repeat for more; default: all).")
    ] = None,
    localqueue_namespace: Annotated[
        list[str] | None, typer.Option(metavar="NAMESPACE", help="Resolve queue labels "
                                       "through the LocalQueues of this namespace only "
                                       "(repeat for more; default: all, or none with "
                                       "--config-namespace).")
    ] = None,
    config_namespace: Annotated[
        str | None, typer.Option(metavar="NAMESPACE", help="Read the scheduler's config "
                                 "(queues, quotas) from this namespace only (default: all).")
    ] = None,
    kubeconfig: KubeconfigOpt = None,
    context: ContextOpt = None,
    cluster_name: ClusterOpt = None,
    prometheus: Annotated[str | None, typer.Option(
        "--prometheus", help="Prometheus base URL for the jobs' live step, step rate and "
        "checkpoint age. Default: the Prometheus operator's Prometheus pod in the cluster, "
        "if any; `off`: none.")] = None,
) -> None:
    """Serve a read-only web view of the cluster: topology (GPUs used and free per spine,
    leaf and node), jobs and their recoveries, queues, and why each pending gang waits
    with what would make it fit. Live: pages follow the API's watches."""
    if not 0 <= port <= 65535:
        raise UsageError(f"--port must be between 0 and 65535, got {port}")
    say_target(kubeconfig, "ui")
    from trainmaster.ui import LOOPBACK, Scope, serve

    if in_cluster:
        host = in_cluster_host(host, kubeconfig, os.environ)
    elif host != LOOPBACK:
        print(f"trainmaster ui: listening on {host}, not loopback: anyone who can reach it "
              "sees the whole cluster's workload", file=sys.stderr)

    def ready(url: str) -> None:
        print(f"trainmaster ui: serving {url} (Ctrl-C to stop)", file=sys.stderr, flush=True)

    with contextlib.suppress(KeyboardInterrupt):
        scope = Scope(jobs=tuple(jobs_namespace) if jobs_namespace else None,
                      events=tuple(events_namespace) if events_namespace else None,
                      configs=config_namespace,
                      local_queues=local_queue_scope(localqueue_namespace, config_namespace))
        asyncio.run(serve(kubeconfig, host, port, ready, scope, prometheus))


def local_queue_scope(named: list[str] | None,
                      config_namespace: str | None) -> tuple[str, ...] | None:
    """Where the UI reads LocalQueues: the namespaces named; else everywhere, unless the
    config is narrowed to one namespace (a scoped identity, which may read none)."""
    if named:
        return tuple(named)
    return None if config_namespace is None else ()


def in_cluster_host(host: str, kubeconfig: Path | None, environ: Mapping[str, str]) -> str:
    """The address `--in-cluster` listens on (every address of the pod), once it is sure
    to be in a pod and to use the pod's own ServiceAccount."""
    from trainmaster.ui import IN_CLUSTER, LOOPBACK

    if host != LOOPBACK:
        raise UsageError("--in-cluster listens on every address of the pod; drop --host")
    if kubeconfig is not None or environ.get("KUBECONFIG"):
        raise UsageError("--in-cluster uses the pod's ServiceAccount; drop --kubeconfig "
                         "and $KUBECONFIG")
    from trainmaster.kubeclient import IN_CLUSTER_ENV, in_pod

    if not in_pod(environ):  # the client package's in-cluster rule
        raise UsageError(f"--in-cluster: not in a pod (${IN_CLUSTER_ENV} is not set); "
                         "`trainmaster ui` listens on loopback by default")
    return IN_CLUSTER
