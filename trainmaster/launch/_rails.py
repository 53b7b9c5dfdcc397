"""Point the collective libraries at the pod's rail interfaces.

The pod learns the rails' subnets from $TRAINMASTER_RAIL_SUBNETS (rendered from the spec);
its rail interfaces are those holding an address of one of them, whatever they are called
(Multus names them as the networks annotation asks: net1.., storage0). Then:

- gloo has no RDMA transport: its TCP pairs go over the rails (GLOO_SOCKET_IFNAME);
- NCCL uses the HCAs (NCCL_IB_HCA) when the pod has RDMA devices, bootstrapping over the
  rendered NCCL_SOCKET_IFNAME (eth0); without RDMA devices (no verbs, as on the local real
  nodes) its socket transport carries the data, so NCCL_SOCKET_IFNAME names the rails.

A value the job's own `env` sets wins: the launcher only fills in what was rendered.
"""

from __future__ import annotations

import fcntl
import ipaddress
import socket
import struct
from collections.abc import Mapping
from pathlib import Path

from trainmaster.api import RAIL_SUBNETS_ENV

RENDERED_SOCKET_IFNAME = "eth0"
_SIOCGIFADDR = 0x8915


def interface_addresses() -> dict[str, str]:
    """IPv4 address of each interface of this network namespace that has one."""
    out = {}
    with socket.socket(socket.AF_INET, socket.SOCK_DGRAM) as sock:
        for _, name in socket.if_nameindex():
            try:
                raw = fcntl.ioctl(sock.fileno(), _SIOCGIFADDR,
                                  struct.pack("256s", name.encode()[:15]))
            except OSError:  # no IPv4 address
                continue
            out[name] = socket.inet_ntoa(raw[20:24])
    return out


def rail_interfaces(subnets: list[str], addresses: Mapping[str, str]) -> list[str]:
    """The interfaces on the rails, in the rails' order (one per rail that has one)."""
    found = []
    for subnet in subnets:
        network = ipaddress.ip_network(subnet, strict=False)
        found += sorted(name for name, addr in addresses.items()
                        if ipaddress.ip_address(addr) in network)[:1]
    return found


def has_rdma_devices(sysfs: Path = Path("/sys")) -> bool:
    folder = sysfs / "class" / "infiniband"
    return folder.is_dir() and any(folder.iterdir())


def rail_env(env: Mapping[str, str], addresses: Mapping[str, str],
             rdma: bool) -> dict[str, str]:
    """The variables to set for the command (empty when the pod has no rail interfaces)."""
    subnets = [s for s in env.get(RAIL_SUBNETS_ENV, "").split(",") if s]
    rails = rail_interfaces(subnets, addresses)
    if not rails:
        return {}
    names = ",".join(rails)
    out = {}
    if "GLOO_SOCKET_IFNAME" not in env:
        out["GLOO_SOCKET_IFNAME"] = names
    if not rdma and env.get("NCCL_SOCKET_IFNAME", RENDERED_SOCKET_IFNAME) == \
            RENDERED_SOCKET_IFNAME:
        out["NCCL_SOCKET_IFNAME"] = names
    return out
