"""One /metrics HTTP server over a private registry, started and stopped by its owner.

The scheduler and the operator each keep their own registry; this is the part they share.
(The launcher has its own: its bundle runs in training images without trainmaster.)
"""

from __future__ import annotations

import threading
from typing import Any

from prometheus_client import CollectorRegistry, start_http_server


class MetricsServer:
    def __init__(self, registry: CollectorRegistry) -> None:
        self.registry = registry
        self._server: Any = None
        self._thread: threading.Thread | None = None

    def serve(self, address: str, port: int) -> int:
        """Start the /metrics HTTP server in a thread; returns the bound port."""
        server, thread = start_http_server(port, addr=address, registry=self.registry)
        self._server, self._thread = server, thread
        return int(server.server_port)

    def stop(self) -> None:
        if self._server is not None:
            self._server.shutdown()
            self._server.server_close()
            self._server = None
        if self._thread is not None:
            self._thread.join(timeout=5)
            self._thread = None
