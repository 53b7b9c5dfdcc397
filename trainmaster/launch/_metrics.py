"""The launcher's Prometheus metrics, served on the worker pod's `metrics` port (the
PodMonitor of the monitoring stack scrapes it).

Every series carries `trainingjob` (the TrainingJob's name; `job` is Prometheus' own scrape
label, which a target may not set) and `rank` (the pod's index, or $RANK under torchrun);
the scrape adds `namespace` and `pod`.

    trainmaster_job_step                              newest training step seen
    trainmaster_job_last_heartbeat_timestamp_seconds  when that step (or a checkpoint) was seen
    trainmaster_job_checkpoint_step                   step of the newest complete checkpoint
    trainmaster_job_last_checkpoint_timestamp_seconds when it was found complete
    trainmaster_job_attempt                           the gang attempt ($TRAINMASTER_RESTART)
"""

from __future__ import annotations

from typing import Any

from prometheus_client import CollectorRegistry, Gauge
from prometheus_client.exposition import start_http_server

METRIC_NAMES = (
    "trainmaster_job_step",
    "trainmaster_job_last_heartbeat_timestamp_seconds",
    "trainmaster_job_checkpoint_step",
    "trainmaster_job_last_checkpoint_timestamp_seconds",
    "trainmaster_job_attempt",
)
METRICS_PORT = 9465
"""The worker container's `metrics` port (9400 is the GPU exporter's)."""


class LaunchMetrics:
    def __init__(self, job: str, rank: int | None, attempt: int = 0) -> None:
        self.registry = CollectorRegistry(auto_describe=True)
        labels = ("trainingjob", "rank")
        values = (job, "" if rank is None else str(rank))

        def gauge(name: str, doc: str) -> Any:
            return Gauge(name, doc, labels, registry=self.registry).labels(*values)

        self.step = gauge("trainmaster_job_step", "Newest training step the launcher saw.")
        self.heartbeat = gauge("trainmaster_job_last_heartbeat_timestamp_seconds",
                               "Unix time of the last progress (a newer step or checkpoint).")
        self.checkpoint_step = gauge("trainmaster_job_checkpoint_step",
                                     "Step of the newest complete checkpoint.")
        self.checkpoint_time = gauge("trainmaster_job_last_checkpoint_timestamp_seconds",
                                     "Unix time the newest checkpoint was found complete.")
        self.attempt = gauge("trainmaster_job_attempt", "The gang attempt this pod belongs to.")
        self.attempt.set(attempt)
        self._server: Any = None

    def serve(self, port: int, address: str) -> int:
        """Serve /metrics on address:port (port 0: any free one); return the port."""
        server, _thread = start_http_server(port, addr=address, registry=self.registry)
        self._server = server
        return int(server.server_port)

    def close(self) -> None:
        if self._server is not None:
            self._server.shutdown()
            self._server.server_close()
            self._server = None

    def progress(self, step: int, when: float) -> None:
        self.step.set(step)
        self.heartbeat.set(when)

    def checkpointed(self, step: int, when: float) -> None:
        self.checkpoint_step.set(step)
        self.checkpoint_time.set(when)
        self.heartbeat.set(when)
