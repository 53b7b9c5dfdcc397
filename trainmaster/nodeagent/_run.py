"""The NIC agent's loop: read the ports, judge them, set the condition (and the metrics),
sleep.

Looking is a few sysfs reads, so the agent looks often (every `interval`, 5 s by default:
a dead rail stalls every collective of the gangs on it, and the operator fences only on the
condition); it writes the condition to the API server only when the verdict changes and
otherwise every `heartbeat` (30 s), so a large cluster's API traffic stays as it was at one
look per 30 s.

What is judged, first that applies: the `--netdevs` given; the node's RDMA devices when
sysfs has any; else the interfaces the node's annotation `trainmaster.io/nic-netdevs`
names (a node without RDMA whose NICs are plain interfaces, such as a local real node on
the stand-in fabric); else nothing, judged `NoRdmaDevices` / `DeviceMissing`."""

from __future__ import annotations

import asyncio
import logging
import time
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
    interval: float = 5.0
    """Seconds between two looks at the ports (sysfs only)."""
    heartbeat: float = 30.0
    """Seconds after which an unchanged verdict is written again (its lastHeartbeatTime)
    and the node, whose annotation names the interfaces, read again."""
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
        node: dict[str, Any] | None = None
        reported_at = 0.0
        while not stop.is_set():
            try:
                due = node is None or time.monotonic() - reported_at >= self.config.heartbeat
                if due:
                    node = await self.kube.get(node_path(self.config.node))
                assert node is not None
                verdict = self.look(annotated_netdevs(node))
                if verdict != last or due:
                    if not due:  # a change: write it against the node as it is now
                        node = await self.kube.get(node_path(self.config.node))
                    await report_condition(self.kube, self.config.node, verdict, current=node)
                    reported_at = time.monotonic()
                    if verdict != last:
                        log.info("%s: NICHealthy=%s %s: %s", self.config.node,
                                 verdict.healthy, verdict.reason, verdict.message)
                    last = verdict
            except Exception as exc:  # the API may be briefly away; try again next round
                log.warning("could not report NIC health of %s: %s", self.config.node, exc)
                node = None  # read it again, and write the verdict, at the next look
            await polling.wait_event(stop, self.config.interval)  # then look again
