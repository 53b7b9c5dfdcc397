"""How a local cluster's timings grow with its number of simulated nodes.

Why: kwok renews every node's Lease every lease-duration/4 seconds. At the kubelet's
40 s that is 2.5 writes per node per ten seconds: 500 Lease updates a second at 5000
nodes, which on a shared 2-core machine starves the Node status updates that make nodes
Ready. So the Lease duration grows past 1000 nodes to keep renewals near 100 a second,
the controller manager's node-monitor grace period follows it (else it would mark nodes
NotReady between renewals), and the Ready deadline and the poll interval grow too.
"""

from __future__ import annotations

import math
from dataclasses import dataclass

BASE_LEASE_SECONDS = 40
"""The kubelet's default Lease duration; kept up to 1000 nodes."""
MAX_LEASE_RENEWALS_PER_SECOND = 100
BASE_READY_SECONDS = 120
READY_SECONDS_PER_NODE = 0.08
"""At 5000 nodes on this machine ~4300 became Ready within 120 s; allow ~2x that rate."""


@dataclass(frozen=True)
class ClusterSizing:
    nodes: int
    lease_seconds: int
    """kwok's --node-lease-duration-seconds (renewed every quarter of it)."""
    grace_seconds: int
    """kube-controller-manager's --node-monitor-grace-period: at least one lease."""
    ready_timeout: float
    """How long `cluster up` waits for every simulated node to be Ready."""
    poll_seconds: float
    """How often the Ready wait lists every node (a list of N nodes is not free)."""


def cluster_sizing(nodes: int) -> ClusterSizing:
    if nodes < 0:
        raise ValueError(f"nodes must be 0 or more, got {nodes}")
    # renewals/s = nodes / (lease / 4)  ->  lease = 4 * nodes / renewals-per-second
    lease = max(BASE_LEASE_SECONDS, math.ceil(4 * nodes / MAX_LEASE_RENEWALS_PER_SECOND))
    return ClusterSizing(
        nodes=nodes,
        lease_seconds=lease,
        grace_seconds=lease + 10,
        ready_timeout=max(BASE_READY_SECONDS, nodes * READY_SECONDS_PER_NODE),
        poll_seconds=min(5.0, max(0.25, nodes / 2000)),
    )
