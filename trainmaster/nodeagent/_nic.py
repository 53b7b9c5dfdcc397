"""Judging a node's RDMA ports: healthy when every expected device is present and every
port is ACTIVE/LinkUp, and no port's link went down since the last look."""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from dataclasses import dataclass

from trainmaster.nodeagent._sysfs import Port


@dataclass(frozen=True)
class NicVerdict:
    healthy: bool
    reason: str
    """CamelCase, as condition reasons are: PortsActive, PortDown, DeviceMissing,
    LinkFlapped, NoRdmaDevices."""
    message: str


def judge_ports(
    ports: Iterable[Port],
    expected_devices: Iterable[str] = (),
    previous: Mapping[str, Mapping[str, int]] | None = None,
) -> NicVerdict:
    """`previous`: port name -> its counters at the last look (link_downed growing means the
    link dropped and came back in between, which a state read alone would miss)."""
    ports = list(ports)
    present = {p.device for p in ports}
    missing = sorted(set(expected_devices) - present)
    if missing:
        return NicVerdict(False, "DeviceMissing",
                          f"RDMA device(s) {', '.join(missing)} not found in sysfs")
    if not ports:
        return NicVerdict(False, "NoRdmaDevices", "no RDMA device found in sysfs")
    down = [p for p in ports if not p.up]
    if down:
        detail = ", ".join(f"{p.name} {p.state}/{p.phys_state}" for p in down)
        return NicVerdict(False, "PortDown", f"{len(down)} of {len(ports)} port(s) down: "
                          f"{detail}")
    flapped = []
    for port in ports:
        before = (previous or {}).get(port.name, {})
        grew = port.counters.get("link_downed", 0) - before.get("link_downed", 0)
        if port.name in (previous or {}) and grew > 0:
            flapped.append(f"{port.name} link_downed +{grew}")
    if flapped:
        return NicVerdict(False, "LinkFlapped", "link went down and up again: "
                          + ", ".join(flapped))
    layers = sorted({p.link_layer for p in ports if p.link_layer})
    return NicVerdict(True, "PortsActive", f"{len(ports)} port(s) ACTIVE/LinkUp"
                      + (f" ({', '.join(layers)})" if layers else ""))
