"""The NIC agent's loop: read the ports, judge them, set the condition, sleep."""

from __future__ import annotations

import asyncio
import contextlib
import logging
from dataclasses import dataclass
from pathlib import Path

from trainmaster.kubeclient import Kube
from trainmaster.nodeagent._condition import report_condition
from trainmaster.nodeagent._nic import NicVerdict, judge_ports
from trainmaster.nodeagent._sysfs import read_netdevs, read_ports

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


class NicAgent:
    def __init__(self, config: NicAgentConfig, kube: Kube) -> None:
        self.config = config
        self.kube = kube
        self._counters: dict[str, dict[str, int]] | None = None

    def look(self) -> NicVerdict:
        if self.config.netdevs:
            ports = read_netdevs(self.config.netdevs, self.config.sysfs)
            verdict = judge_ports(ports, self.config.netdevs, self._counters)
        else:
            ports = read_ports(self.config.sysfs)
            verdict = judge_ports(ports, self.config.devices, self._counters)
        self._counters = {p.name: dict(p.counters) for p in ports}
        return verdict

    async def once(self) -> NicVerdict:
        verdict = self.look()
        await report_condition(self.kube, self.config.node, verdict)
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
            with contextlib.suppress(TimeoutError):  # the interval is over: look again
                await asyncio.wait_for(stop.wait(), self.config.interval)
