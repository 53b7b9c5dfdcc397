"""The NIC agent's Prometheus metrics: what it saw at its last look, served on /metrics
(the rendered ServiceMonitor `<cluster>-nic-agent` scrapes it on the pod's IP).

Every series carries `node` (the node the agent reports on; the scrape adds `pod`). A port
is an RDMA device's port (`mlx5_0`, port 1) or, for a node judged by its network
interfaces, the interface (port 1).

    trainmaster_nic_healthy                     1 if NICHealthy is True, else 0
    trainmaster_nic_ports                       ports seen at the last look
    trainmaster_nic_port_up{device,port}        1 if the port is ACTIVE/LinkUp, else 0
    trainmaster_nic_port_link_downed{device,port}  the port's link_downed counter (the
                                                kernel's; carrier_down_count on a netdev)
    trainmaster_nic_last_look_timestamp_seconds when the agent last looked

A private registry (not the process-global one), as the operator's and the scheduler's.
"""

from __future__ import annotations

import contextlib
import time
from collections.abc import Iterable

from prometheus_client import CollectorRegistry, Gauge

from trainmaster.metrics_server import MetricsServer
from trainmaster.nodeagent._nic import NicVerdict
from trainmaster.nodeagent._sysfs import Port


class NicMetrics:
    def __init__(self, node: str) -> None:
        self.registry = CollectorRegistry(auto_describe=True)
        ns, r = "trainmaster_nic", self.registry
        self.node = node
        self.healthy = Gauge(f"{ns}_healthy", "1 if the node's NICHealthy condition is True "
                             "(every port ACTIVE/LinkUp, no device missing, no flap), else 0.",
                             ["node", "reason"], registry=r)
        self.ports = Gauge(f"{ns}_ports", "Ports the agent saw at its last look.", ["node"],
                           registry=r)
        self.port_up = Gauge(f"{ns}_port_up", "1 if the port is ACTIVE/LinkUp, else 0.",
                             ["node", "device", "port"], registry=r)
        self.link_downed = Gauge(
            f"{ns}_port_link_downed", "The port's link_downed counter as the kernel reports it "
            "(carrier_down_count for a network interface).", ["node", "device", "port"],
            registry=r)
        self.last_look = Gauge(f"{ns}_last_look_timestamp_seconds",
                               "Unix time of the agent's last look at the ports.", ["node"],
                               registry=r)
        self._reason: str | None = None
        self._seen: set[tuple[str, str]] = set()
        self._http = MetricsServer(r)

    def observe(self, ports: Iterable[Port], verdict: NicVerdict,
                now: float | None = None) -> None:
        ports = list(ports)
        if self._reason is not None and self._reason != verdict.reason:
            with contextlib.suppress(KeyError):  # one series per node: the current reason
                self.healthy.remove(self.node, self._reason)
        self._reason = verdict.reason
        self.healthy.labels(self.node, verdict.reason).set(1 if verdict.healthy else 0)
        self.ports.labels(self.node).set(len(ports))
        seen = set()
        for p in ports:
            key = (p.device, str(p.port))
            seen.add(key)
            self.port_up.labels(self.node, *key).set(1 if p.up else 0)
            if "link_downed" in p.counters:
                self.link_downed.labels(self.node, *key).set(p.counters["link_downed"])
        for gone in self._seen - seen:  # a device that vanished: no stale series
            for gauge in (self.port_up, self.link_downed):
                with contextlib.suppress(KeyError):
                    gauge.remove(self.node, *gone)
        self._seen = seen
        self.last_look.labels(self.node).set(time.time() if now is None else now)

    def serve(self, address: str, port: int) -> int:
        """Start the /metrics HTTP server in a thread; returns the bound port."""
        return self._http.serve(address, port)

    def stop(self) -> None:
        self._http.stop()
