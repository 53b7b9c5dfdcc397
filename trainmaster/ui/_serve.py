"""`trainmaster ui`: connect, fill the store (one list per kind), then serve.

The store is filled before the server accepts a connection, so the first page is
complete; a cluster that cannot be reached fails here, with one line, not in a browser.
"""

from __future__ import annotations

import asyncio
from collections.abc import Callable
from pathlib import Path

from trainmaster.kubeclient import Kube
from trainmaster.ui._app import create_app
from trainmaster.ui._world import Scope, Store

LOOPBACK = "127.0.0.1"
IN_CLUSTER = "0.0.0.0"
"""Where `trainmaster ui --in-cluster` listens: every address of its pod (the Service's
traffic arrives on the pod's IP, `kubectl port-forward`'s on loopback). Never the default:
outside a pod this would open the views to the whole network."""


async def serve(kubeconfig: Path | None, host: str, port: int,
                ready: Callable[[str], None] = lambda url: None,
                scope: Scope | None = None, prometheus: str | None = None) -> None:
    import uvicorn

    kube = await Kube.connect(kubeconfig, user_agent="trainmaster-ui")
    store = Store(kube, scope, prometheus)
    try:
        await store.start()
        config = uvicorn.Config(create_app(store, warm=True), host=host, port=port,
                                log_level="warning", lifespan="off",
                                timeout_graceful_shutdown=1)
        server = uvicorn.Server(config)

        async def announce() -> None:
            while not server.started:
                await asyncio.sleep(0.05)
            # The bound port: --port 0 picks a free one.
            bound = server.servers[0].sockets[0].getsockname()[1] if server.servers else port
            shown = f"[{host}]" if ":" in host else host
            ready(f"http://{shown}:{bound}/")

        waiter = asyncio.create_task(announce())
        try:
            await server.serve()
        finally:
            waiter.cancel()
    finally:
        await store.stop()
        await kube.close()
