"""InfiniBand/RoCE ports as the kernel shows them under /sys/class/infiniband, and plain
network interfaces under /sys/class/net (operstate, carrier, carrier_down_count).

    <root>/class/infiniband/<device>/ports/<n>/state        "4: ACTIVE"
    <root>/class/infiniband/<device>/ports/<n>/phys_state   "5: LinkUp"
    <root>/class/infiniband/<device>/ports/<n>/link_layer   "InfiniBand" | "Ethernet" (RoCE)
    <root>/class/infiniband/<device>/ports/<n>/rate         "400 Gb/sec (4X NDR)"
    <root>/class/infiniband/<device>/ports/<n>/counters/*   error counters (not on every NIC)

`root` is the sysfs mount: /sys on a host, the host's /sys mounted read-only in a pod, or a
folder of plain files in tests.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field
from pathlib import Path

ERROR_COUNTERS = (
    "link_downed",
    "link_error_recovery",
    "symbol_error",
    "port_rcv_errors",
    "local_link_integrity_errors",
    "excessive_buffer_overrun_errors",
)
"""Counters that only grow when the link misbehaves (IB spec PortCounters)."""


@dataclass(frozen=True)
class Port:
    device: str
    port: int
    state: str
    """Logical state name: ACTIVE, DOWN, INIT, ARMED (the text after "N: ")."""
    phys_state: str
    """Physical state name: LinkUp, Polling, Disabled, ..."""
    link_layer: str = ""
    rate: str = ""
    counters: Mapping[str, int] = field(default_factory=dict)

    @property
    def name(self) -> str:
        return f"{self.device}/{self.port}"

    @property
    def up(self) -> bool:
        return self.state == "ACTIVE" and self.phys_state == "LinkUp"


def _text(path: Path) -> str:
    try:
        return path.read_text().strip()
    except OSError:
        return ""


def _named_state(raw: str) -> str:
    """ "4: ACTIVE" -> "ACTIVE"; an unparsable value is kept as it is."""
    return raw.split(":", 1)[1].strip() if ":" in raw else raw


def _counters(folder: Path) -> dict[str, int]:
    out = {}
    for name in ERROR_COUNTERS:
        raw = _text(folder / name)
        if raw.isdigit():
            out[name] = int(raw)
    return out


def read_ports(root: Path = Path("/sys")) -> list[Port]:
    """Every port of every RDMA device under `root`, sorted; empty if there are none."""
    base = root / "class" / "infiniband"
    ports: list[Port] = []
    if not base.is_dir():
        return ports
    for device in sorted(p for p in base.iterdir() if (p / "ports").is_dir()):
        for folder in sorted((device / "ports").iterdir(), key=lambda p: p.name):
            if not folder.name.isdigit():
                continue
            ports.append(Port(
                device=device.name,
                port=int(folder.name),
                state=_named_state(_text(folder / "state")) or "UNKNOWN",
                phys_state=_named_state(_text(folder / "phys_state")) or "UNKNOWN",
                link_layer=_text(folder / "link_layer"),
                rate=_text(folder / "rate"),
                counters=_counters(folder / "counters"),
            ))
    return ports


def _netdev_port(folder: Path) -> Port:
    operstate = _text(folder / "operstate")  # up, down, lowerlayerdown, dormant, unknown
    carrier = _text(folder / "carrier")  # "1", "0"; unreadable (EINVAL) while admin-down
    up = operstate == "up" and carrier == "1"
    downs = _text(folder / "carrier_down_count")
    return Port(
        device=folder.name,
        port=1,
        state="ACTIVE" if up else "DOWN",
        phys_state="LinkUp" if carrier == "1" else f"NoCarrier ({operstate or 'gone'})",
        link_layer="Ethernet",
        # Each loss of carrier counts here, as link_downed does on an IB port: a link that
        # dropped and came back between two looks shows as grown.
        counters={"link_downed": int(downs)} if downs.isdigit() else {},
    )


def read_netdevs(names: Iterable[str], root: Path = Path("/sys")) -> list[Port]:
    """The named network interfaces (a RoCE HCA's netdev, or a rail interface of the local
    stand-in fabric) under `root`/class/net, as ports: ACTIVE/LinkUp when the interface is
    up with carrier. An interface that is not there is left out (judged DeviceMissing)."""
    base = root / "class" / "net"
    return [_netdev_port(base / name) for name in sorted(names) if (base / name).is_dir()]
