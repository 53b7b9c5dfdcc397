"""The NIC agent's loop: read the ports, judge them, set the condition (and the metrics),
sleep.

What is judged, first that applies: the `--netdevs` given; the node's RDMA devices when
sysfs has any; else the interfaces the node's annotation `trainmaster.io/nic-netdevs`
names (a node without RDMA whose NICs are plain interfaces, such as a local real node on
the stand-in fabric); else nothing, judged `NoRdmaDevices` / `DeviceMissing`."""

from __future__ import annotations

import asyncio
import logging
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from trainmaster import polling
from trainmaster.api import NIC_NETDEVS_ANNOTATION
from trainmaster.kubeclient import Kube, node_path
from trainmaster.nodeagent._condition import report_condition
from trainmaster.nodeagent._metrics import NicMetrics
from trainmaster.nodeagent._nic import NicVerdict, judge_ports
from trainmaster.nodeagent._sysfs import Port, read_netdevs, read_ports

log = logging.getLogger(__name__)


@dataclass(frozen=True)
class NicAgentConfig:
    node: str
    sysfs: Path = Path("/sys")
    devices: tuple[str, ...] = ()
    """RDMA devices the node must have (the spec's rails); empty: whatever is there."""
    netdevs: tuple[str, ...] = ()
    """Network interfaces to judge instead of RDMA devices (a node without RDMA, such as a
    local real node on the stand-in fabric): each must be there, up, with carrier."""
    interval: float = 30.0
    kubeconfig: Path | None = None


def annotated_netdevs(node: dict[str, Any]) -> tuple[str, ...]:
    """The interfaces the node's `trainmaster.io/nic-netdevs` annotation names."""
    raw = ((node.get("metadata") or {}).get("annotations") or {}).get(NIC_NETDEVS_ANNOTATION)
    return tuple(n.strip() for n in str(raw or "").split(",") if n.strip())


class NicAgent:
    def __init__(self, config: NicAgentConfig, kube: Kube,
                 metrics: NicMetrics | None = None) -> None:
        self.config = config
        self.kube = kube
        self.metrics = metrics
        self._counters: dict[str, dict[str, int]] | None = None

    def look(self, annotated: tuple[str, ...] = ()) -> NicVerdict:
        """Judge the ports (module docstring: which); `annotated` is the node's
        annotation's interfaces."""
        ports: list[Port] = []
        netdevs = self.config.netdevs
        if not netdevs:
            ports = read_ports(self.config.sysfs)
            if not ports:
                netdevs = annotated
        if netdevs:
            ports = read_netdevs(netdevs, self.config.sysfs)
            verdict = judge_ports(ports, netdevs, self._counters)
        else:
            verdict = judge_ports(ports, self.config.devices, self._counters)
        self._counters = {p.name: dict(p.counters) for p in ports}
        if self.metrics is not None:
            self.metrics.observe(ports, verdict)
        return verdict

    async def once(self) -> NicVerdict:
        node = await self.kube.get(node_path(self.config.node))
        verdict = self.look(annotated_netdevs(node))
        await report_condition(self.kube, self.config.node, verdict, current=node)
        return verdict

    async def run(self, stop: asyncio.Event) -> None:
        last: NicVerdict | None = None
        while not stop.is_set():
            try:
                verdict = await self.once()
                if verdict != last:
                    log.info("%s: NICHealthy=%s %s: %s", self.config.node, verdict.healthy,
                             verdict.reason, verdict.message)
                last = verdict
            except Exception as exc:  # the API may be briefly away; try again next round
                log.warning("could not report NIC health of %s: %s", self.config.node, exc)
            await polling.wait_event(stop, self.config.interval)  # then look again
