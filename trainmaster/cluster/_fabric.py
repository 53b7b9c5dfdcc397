"""The real nodes' stand-in fabric: one host bridge per compute rail, one for storage.

A real GPU node has one HCA per rail (RoCE: a netdev per port) cabled to that rail's switch,
and a storage NIC on the storage network. Here every real node gets, in its view of the
network (the host's namespace, which kubelet and the CNI plugins run in), one interface per
rail and one for storage: the node end of a veth pair whose other end is a port of the rail's
(or storage's) bridge. So two nodes on the same rail reach each other only through that rail's
bridge, exactly as two HCAs of one rail reach each other only through the rail's switch; the
rails' bridges are never connected to each other, to the pod network or to the host's own
interfaces, and carry no address of the host's (nothing routes into them).

Pods attach with macvlan on the node's interface, as on a RoCE cluster (docs/real-nodes.md,
"Secondary networks"). Taking a node's rail interface down (`ip link set … down`) cuts
exactly that node off that rail, like a cable pull or a failed port.

Names are the slot's (host-global, at most 15 bytes): bridges ``tm<s>r<k>`` and ``tm<s>st``;
a node's interfaces ``tm<s>n<i>r<k>`` and ``tm<s>n<i>st``, their bridge ends with a ``b``.
"""

from __future__ import annotations

from dataclasses import dataclass

from trainmaster.cluster._host import run
from trainmaster.spec import ClusterSpec

# A veth's default MTU is 1500; the spec's fabric MTUs (4096 for IB, 9000 for storage) fit a
# veth and a bridge, so the stand-in carries the same frame sizes as the real networks.


@dataclass(frozen=True)
class FabricPlan:
    """What one cluster's fabric holds: the MTU of each rail, and storage's if any."""

    rail_mtus: tuple[int, ...]
    storage_mtu: int | None


def plan(spec: ClusterSpec) -> FabricPlan:
    compute = spec.networks.compute
    storage = spec.networks.storage
    return FabricPlan(
        rail_mtus=tuple(compute.mtu for _ in compute.rails),
        storage_mtu=storage.mtu if storage is not None else None,
    )


def rail_bridge(slot: int, rail: int) -> str:
    return f"tm{slot}r{rail}"


def storage_bridge(slot: int) -> str:
    return f"tm{slot}st"


def node_rail(slot: int, node: int, rail: int) -> str:
    """The node's interface on a rail: what its HCA's netdev is on a RoCE node."""
    return f"tm{slot}n{node}r{rail}"


def node_storage(slot: int, node: int) -> str:
    return f"tm{slot}n{node}st"


def _bridge(name: str, mtu: int) -> None:
    run(["ip", "link", "add", name, "mtu", str(mtu), "type", "bridge"])
    run(["ip", "link", "set", name, "up"])


def _cable(node_end: str, bridge: str, mtu: int) -> None:
    """A veth from the node's interface to a port of the bridge."""
    port = node_end + "b"
    run(["ip", "link", "add", node_end, "mtu", str(mtu), "type", "veth",
         "peer", "name", port, "mtu", str(mtu)])
    run(["ip", "link", "set", port, "master", bridge])
    run(["ip", "link", "set", port, "up"])
    run(["ip", "link", "set", node_end, "up"])


def create(slot: int, nodes: int, fabric: FabricPlan) -> list[str]:
    """The bridges and each node's interfaces; returns the node interfaces made."""
    made = []
    for rail, mtu in enumerate(fabric.rail_mtus):
        _bridge(rail_bridge(slot, rail), mtu)
        for node in range(nodes):
            _cable(node_rail(slot, node, rail), rail_bridge(slot, rail), mtu)
            made.append(node_rail(slot, node, rail))
    if fabric.storage_mtu is not None:
        _bridge(storage_bridge(slot), fabric.storage_mtu)
        for node in range(nodes):
            _cable(node_storage(slot, node), storage_bridge(slot), fabric.storage_mtu)
            made.append(node_storage(slot, node))
    return made


def is_fabric_link(slot: int, name: str) -> bool:
    """A link of this slot's fabric: its bridges, the nodes' interfaces and their ports."""
    if name.startswith((f"tm{slot}r", f"tm{slot}st")):
        return True
    prefix = f"tm{slot}n"
    if not name.startswith(prefix):
        return False
    rest = name[len(prefix):]
    digits = len(rest) - len(rest.lstrip("0123456789"))
    return digits > 0 and rest[digits:].startswith(("r", "st"))


def links(slot: int) -> list[str]:
    out = run(["ip", "-o", "link", "show"]).stdout
    names = [line.split(":")[1].strip().split("@")[0] for line in out.splitlines()]
    return [n for n in names if is_fabric_link(slot, n)]


def delete(slot: int) -> None:
    """Remove the slot's fabric: node interfaces first (a veth takes its port along), then
    the bridges. Pods' macvlans on a node interface go with it."""
    for name in sorted(links(slot), key=lambda n: n.startswith((f"tm{slot}r", f"tm{slot}st"))):
        run(["ip", "link", "delete", name], check=False)
