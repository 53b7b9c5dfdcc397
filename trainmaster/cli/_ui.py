"""`trainmaster ui`: the live web view of a cluster (trainmaster.ui, docs/ui.md)."""

from __future__ import annotations

import asyncio
import contextlib
import sys
from typing import Annotated

import typer

from trainmaster.cli._app import ContextOpt, KubeconfigOpt, app
from trainmaster.errors import UsageError


@app.command("ui")
def ui(
    host: Annotated[
        str, typer.Option(help="Address to listen on (loopback by default: the views show "
                          "the whole cluster's workload; bind wider only behind your own "
                          "access control).")
    ] = "127.0.0.1",
    port: Annotated[int, typer.Option(help="TCP port (0: any free port).")] = 8080,
    kubeconfig: KubeconfigOpt = None,
    context: ContextOpt = None,
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
    from trainmaster.ui import serve

    def ready(url: str) -> None:
        print(f"trainmaster ui: serving {url} (Ctrl-C to stop)", file=sys.stderr, flush=True)

    with contextlib.suppress(KeyboardInterrupt):
        asyncio.run(serve(kubeconfig, host, port, ready, prometheus))
