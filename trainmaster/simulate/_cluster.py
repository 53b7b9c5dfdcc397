"""The simulated cluster: scheduler ``NodeInfo``s from ``--nodes N`` or a spec file.

``--nodes N`` is the bench topology: 8 GPUs per node, 20 nodes per leaf, 5 leaves per
spine (a last leaf or spine may be short). Nodes are named so that name order (the
snapshot's index order) is rack order.
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

from trainmaster.scheduler import GPU, PODS, NodeInfo

from ._jobs import WorkloadError

GPUS_PER_NODE = 8
NODES_PER_LEAF = 20
LEAVES_PER_SPINE = 5
MAX_PODS = 110


@dataclass(frozen=True, slots=True)
class SimCluster:
    nodes: tuple[NodeInfo, ...]
    levels: tuple[str, ...]
    """Topology level names, top level first (``("spine", "leaf")``)."""

    @property
    def gpus(self) -> int:
        return sum(n.allocatable.get(GPU, 0) for n in self.nodes)

    @property
    def largest_leaf_gpus(self) -> int:
        """GPUs of the largest lowest-level domain (the whole cluster without levels)."""
        per: dict[tuple[str, ...], int] = {}
        for n in self.nodes:
            per[n.topology] = per.get(n.topology, 0) + n.allocatable.get(GPU, 0)
        return max(per.values(), default=0)

    @property
    def largest_node_gpus(self) -> int:
        return max((n.allocatable.get(GPU, 0) for n in self.nodes), default=0)


def bench_cluster(nodes: int) -> SimCluster:
    if nodes < 1:
        raise WorkloadError("--nodes must be at least 1")
    width = len(str(nodes - 1))
    infos = tuple(
        NodeInfo(
            f"node-{i:0{width}d}",
            {GPU: GPUS_PER_NODE, PODS: MAX_PODS},
            topology=(f"spine-{i // (NODES_PER_LEAF * LEAVES_PER_SPINE)}",
                      f"leaf-{i // NODES_PER_LEAF}"),
        )
        for i in range(nodes)
    )
    return SimCluster(infos, ("spine", "leaf"))


def spec_cluster(path: Path) -> SimCluster:
    """The nodes of a TrainingCluster spec (validated as ``trainmaster validate`` does)."""
    from trainmaster.spec import load_spec, resolve_nodes

    spec = load_spec(path)
    resolved = resolve_nodes(spec.topology)
    levels = tuple(spec.topology.levels)
    width = len(str(max(len(resolved) - 1, 0)))
    infos = []
    for i, node in enumerate(resolved):
        if node.gpus <= 0:
            continue
        # Prefixed with the tree position so that name order is rack order.
        infos.append(NodeInfo(f"{i:0{width}d}-{node.name}",
                              {GPU: node.gpus, PODS: node.max_pods},
                              topology=tuple(node.switches)))
    if not infos:
        raise WorkloadError(f"{path}: the spec has no GPU nodes to simulate")
    return SimCluster(tuple(infos), levels)
