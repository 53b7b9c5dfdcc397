"""How badly free GPUs are scattered.

Only schedulable (uncordoned) nodes with some of the resource count. Definitions:

* a node is *fully free* if none of its resource is requested (tracked or untracked);
* a leaf (domain of the lowest topology level) is *fully free* if all its counted nodes
  are fully free;
* ``fragmentation_ratio`` = free units on nodes that are *not* fully free / all free
  units: the share of free capacity stranded next to running pods. 0.0 when every free
  GPU sits on an empty node (or nothing is free), 1.0 when every free GPU shares a node
  with a running pod;
* ``leaf_fragmentation_ratio`` = the same with leaves instead of nodes: free units outside
  fully free leaves / all free units. Large ``required`` leaf-level gangs need whole
  leaves, so this is the number that predicts their wait.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from types import MappingProxyType

from ..framework.model import GPU
from .cluster_state import ClusterState


@dataclass(frozen=True, slots=True)
class FragmentationReport:
    resource: str
    total: int
    """Allocatable units on counted nodes."""
    free: int
    nodes: int
    fully_free_nodes: int
    leaves: int
    fully_free_leaves: int
    free_per_leaf: Mapping[str, int]
    """Leaf name -> free units (empty if the snapshot has no topology levels)."""
    largest_free_node: int
    fragmentation_ratio: float
    leaf_fragmentation_ratio: float


def fragmentation_report(snapshot: ClusterState, resource: str = GPU) -> FragmentationReport:
    counted: list[int] = []
    node_free: dict[int, int] = {}
    node_whole: dict[int, bool] = {}
    cols = snapshot.columns
    for i, node in enumerate(cols.nodes):
        alloc = node.allocatable.get(resource, 0)
        if not cols.schedulable[i] or alloc <= 0:
            continue
        counted.append(i)
        free = max(cols.free[i].get(resource, 0), 0)
        node_free[i] = free
        node_whole[i] = cols.requested[i].get(resource, 0) == 0
    total = sum(cols.nodes[i].allocatable.get(resource, 0) for i in counted)
    free_total = sum(node_free.values())
    stranded = sum(f for i, f in node_free.items() if not node_whole[i])

    per_leaf: dict[str, int] = {}
    whole_leaves = 0
    leaves = 0
    leaf_whole_free = 0
    if snapshot.levels:
        for dom in snapshot.live_domains(1):
            members = [i for i in dom.nodes if i in node_free]
            if not members:
                continue
            leaves += 1
            free = sum(node_free[i] for i in members)
            per_leaf[dom.name] = free
            if all(node_whole[i] for i in members):
                whole_leaves += 1
                leaf_whole_free += free
    else:
        leaf_whole_free = free_total - stranded
    return FragmentationReport(
        resource=resource,
        total=total,
        free=free_total,
        nodes=len(counted),
        fully_free_nodes=sum(node_whole.values()),
        leaves=leaves,
        fully_free_leaves=whole_leaves,
        free_per_leaf=MappingProxyType(per_leaf),
        largest_free_node=max(node_free.values(), default=0),
        fragmentation_ratio=stranded / free_total if free_total else 0.0,
        leaf_fragmentation_ratio=(free_total - leaf_whole_free) / free_total if free_total else 0.0,
    )
