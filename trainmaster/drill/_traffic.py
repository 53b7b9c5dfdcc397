"""One rank's bytes per interface, read in its pod's network namespace (the training
process's `/proc/<pid>/net/dev`, the kernel's counters), each interface named by the
network Multus attached it to (the pod's `k8s.v1.cni.cncf.io/network-status`): what went
over the rails, the pod network and the storage network since the pod started. And each
real node's storage interface, read on the host (`/sys/class/net/<if>/statistics`): what
the node's pods sent and received over the storage network since `cluster up`, the
warm-ups' dataset reads among it (a warm-up pod's own namespace is gone once it finished)."""

from __future__ import annotations

import json
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from trainmaster.cluster import ClusterError, NodeLayout
from trainmaster.drill._faults import _node, container_id, container_pids

NETWORK_STATUS = "k8s.v1.cni.cncf.io/network-status"


@dataclass(frozen=True)
class InterfaceBytes:
    interface: str
    network: str
    """The network-status entry's `name` (`<ns>/<nad>`, or the pod network's)."""
    addresses: tuple[str, ...]
    rx: int
    tx: int


def parse_net_dev(text: str) -> dict[str, tuple[int, int]]:
    """`/proc/net/dev` as interface -> (received bytes, sent bytes)."""
    counts: dict[str, tuple[int, int]] = {}
    for line in text.splitlines()[2:]:
        name, _, fields = line.partition(":")
        values = fields.split()
        if len(values) >= 9:
            counts[name.strip()] = (int(values[0]), int(values[8]))
    return counts


def _networks(pod: dict[str, Any]) -> dict[str, tuple[str, tuple[str, ...]]]:
    raw = ((pod.get("metadata") or {}).get("annotations") or {}).get(NETWORK_STATUS, "[]")
    return {str(e.get("interface")): (str(e.get("name", "")), tuple(e.get("ips") or ()))
            for e in json.loads(raw)}


def rank_traffic(nodes: list[NodeLayout], pod: dict[str, Any]) -> list[InterfaceBytes]:
    """The pod's interfaces but `lo`, in its network-status' order."""
    pids = container_pids(_node(nodes, pod), container_id(pod))
    try:
        counts = parse_net_dev(Path(f"/proc/{pids[0]}/net/dev").read_text())
    except (OSError, IndexError) as exc:
        raise ClusterError(f"no network counters for {pod['metadata']['name']}: {exc}") from None
    networks = _networks(pod)
    order = [*networks, *sorted(set(counts) - set(networks))]
    return [InterfaceBytes(name, networks.get(name, ("", ()))[0],
                           networks.get(name, ("", ()))[1], *counts[name])
            for name in order if name in counts and name != "lo"]


@dataclass(frozen=True)
class NodeInterfaceBytes:
    node: str
    interface: str
    rx: int
    """Bytes into the node (from the network), since the interface was made."""
    tx: int


def _statistics(interface: str) -> tuple[int, int]:
    stats = Path("/sys/class/net") / interface / "statistics"
    try:
        return int((stats / "rx_bytes").read_text()), int((stats / "tx_bytes").read_text())
    except (OSError, ValueError) as exc:
        raise ClusterError(f"no byte counters for interface {interface}: {exc}") from None


def node_storage_traffic(nodes: list[NodeLayout]) -> list[NodeInterfaceBytes]:
    """Each real node's bytes through its storage interface (none without one)."""
    out = []
    for node in nodes:
        if Path("/sys/class/net", node.storage).exists():
            out.append(NodeInterfaceBytes(node.name, node.storage, *_statistics(node.storage)))
    return out
