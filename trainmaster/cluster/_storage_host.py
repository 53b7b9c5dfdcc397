"""The host's address on the real nodes' storage network, where the cluster's S3 server
listens, so dataset reads travel over the storage network (the pods' `storage0`) and not
over the pod network.

A pod's `storage0` is a macvlan child of its node's storage interface, whose veth ends in
the storage bridge `tm<s>st` (_fabric). A macvlan child cannot reach its own parent, but it
reaches the bridge: an address on the bridge is the storage server of this stand-in, as a
storage appliance's NIC is on a real storage network.

The address is the storage subnet's last usable address minus the slot (clusters on other
slots use the same subnet on their own bridges, so each gets its own address). It is added
with `noprefixroute`, and the subnet's route lives in a table of the slot's own, chosen by
a rule `from <address>`: replies leave by this slot's bridge, and the host's main table
never routes the subnet (nothing from the pod network is forwarded onto it). Forwarding is
off on the bridge: nothing arriving there is routed off it. So the server is reachable from
this slot's storage network (and, as the host's local address, from its own pods' network)
and from nothing off this host: the documented exception to "servers listen on loopback
only" (docs/real-nodes.md).
"""

from __future__ import annotations

import ipaddress

from trainmaster.cluster._fabric import storage_bridge
from trainmaster.cluster._host import run
from trainmaster.spec import ClusterSpec

_TABLE_BASE = 7200
"""Routing table and rule priority of slot s: 7200 + s (slots are 0-15)."""


def table(slot: int) -> int:
    return _TABLE_BASE + slot


def host_address(subnet: str, slot: int) -> str:
    """The host's address on the storage subnet for `slot`: the last usable one minus the
    slot (whereabouts hands pods the lowest free addresses, from the other end)."""
    net = ipaddress.ip_network(subnet)
    return str(net.broadcast_address - 1 - slot)


def attach(slot: int, subnet: str) -> str:
    """Give the slot's storage bridge the host's address; return it."""
    bridge, address = storage_bridge(slot), host_address(subnet, slot)
    prefix = ipaddress.ip_network(subnet).prefixlen
    detach(slot)  # a rule a crashed cluster of this slot left
    run(["sysctl", "-q", "-w", f"net.ipv4.conf.{bridge}.forwarding=0"])
    run(["ip", "addr", "add", f"{address}/{prefix}", "dev", bridge, "noprefixroute"])
    run(["ip", "route", "replace", subnet, "dev", bridge, "src", address,
         "table", str(table(slot))])
    run(["ip", "rule", "add", "from", address, "lookup", str(table(slot)),
         "pref", str(table(slot))])
    return address


def rules(slot: int) -> list[str]:
    """The slot's policy rules still in place (empty after `detach`)."""
    out = run(["ip", "rule", "show", "pref", str(table(slot))], check=False).stdout
    return [line.strip() for line in out.splitlines() if line.strip()]


def detach(slot: int) -> None:
    """Remove the slot's rule and table; the address goes with the bridge."""
    for _ in rules(slot):
        run(["ip", "rule", "del", "pref", str(table(slot))], check=False)
    run(["ip", "route", "flush", "table", str(table(slot))], check=False)


def storage_server_address(spec: ClusterSpec, slot: int) -> str | None:
    """Where a server for the pods' storage network listens on this slot's real nodes;
    None when the spec has no storage network."""
    storage = spec.networks.storage
    return host_address(storage.subnet, slot) if storage is not None else None
