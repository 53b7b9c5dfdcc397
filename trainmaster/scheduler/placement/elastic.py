"""Sizes to try for an elastic gang: from the most members that could fit down to its
minimum. The placement itself is the rigid one (``place_gang`` on ``Gang.sized``); this
only bounds how many attempts a cycle makes.
"""

from __future__ import annotations

from ..framework.model import GPU, Gang
from ..state import ClusterState


def gpu_bound(snapshot: ClusterState, gang: Gang) -> int:
    """At most how many of ``gang``'s members could fit on the schedulable nodes' free GPUs
    now (members alike: the first member's request). No GPUs asked: every member."""
    per_pod = gang.members[0].requests.get(GPU, 0) if gang.members else 0
    if per_pod <= 0:
        return len(gang.members)
    return sum((free // per_pod) * len(nodes)
               for free, nodes in snapshot.gpu_buckets.items() if free >= per_pod)


def sizes(snapshot: ClusterState, gang: Gang) -> range:
    """Member counts to try, largest first: ``len(members)`` (capped by ``gpu_bound``)
    down to ``required_members``; empty when even the minimum cannot have the GPUs."""
    top = min(len(gang.members), gpu_bound(snapshot, gang))
    return range(top, gang.required_members - 1, -1)
