"""The benchmark's own local control plane: the bench stack's topology with N nodes.

Why its own: the measurement must not share the API server with anything else, and the
stock kube-scheduler must *not* run (it is a contender, started and stopped by the
benchmark). Nodes are the bench stack's (8 GPUs, 8 RDMA rails); leaves hold 20 nodes
and spines 5 leaves, so the default 500 nodes are exactly ``stacks/bench``. The state
lives in a temporary folder and everything is stopped afterwards, failures included.
"""

from __future__ import annotations

import contextlib
import math
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any

from trainmaster.api import API_VERSION, CLUSTER_KIND

NODES_PER_LEAF = 20
LEAVES_PER_SPINE = 5
LEVELS = ("spine", "leaf")


def bench_spec(nodes: int) -> dict[str, Any]:
    """A TrainingCluster document like stacks/bench/cluster.yaml, with ``nodes`` nodes."""
    if nodes < 1:
        raise ValueError("--nodes must be at least 1")
    topology: dict[str, Any] = {
        "levels": list(LEVELS),
        "node": {"gpus": 8, "gpuModel": "nvidia-h100-80gb", "nics": 8, "cpu": 128,
                 "memory": "2048Gi", "localDisk": "15Ti"},
    }
    per_spine = NODES_PER_LEAF * LEAVES_PER_SPINE
    if nodes % per_spine == 0:
        topology["generate"] = {"switchesPerLevel": [nodes // per_spine, LEAVES_PER_SPINE],
                                "nodesPerLeaf": NODES_PER_LEAF}
    else:
        leaves = [min(NODES_PER_LEAF, nodes - i * NODES_PER_LEAF)
                  for i in range(math.ceil(nodes / NODES_PER_LEAF))]
        spines = []
        for s in range(math.ceil(len(leaves) / LEAVES_PER_SPINE)):
            chunk = leaves[s * LEAVES_PER_SPINE:(s + 1) * LEAVES_PER_SPINE]
            spines.append({
                "name": f"spine-{s}",
                "switches": [{"name": f"leaf-{s * LEAVES_PER_SPINE + j}", "nodes": count}
                             for j, count in enumerate(chunk)],
            })
        topology["switches"] = spines
    return {
        "apiVersion": API_VERSION,
        "kind": CLUSTER_KIND,
        "metadata": {"name": "bench"},
        "topology": topology,
        "networks": {
            "compute": {"fabric": "infiniband",
                        "rails": [{"subnet": f"10.{r}.0.0/16"} for r in range(8)]},
            "storage": {"subnet": "10.8.0.0/16"},
        },
        "scheduler": {"bindConcurrency": 128, "clientQps": 5000},
    }


def bench_cluster(
    nodes: int, kubeconfig: Path | None, report: Callable[[str], None],
    apiserver_args: Sequence[str] = (),
) -> contextlib.AbstractContextManager[Path]:
    """A kubeconfig: the given one, or that of a fresh local cluster (stopped after)."""
    from trainmaster import cluster

    return cluster.temporary_cluster(bench_spec(nodes), kubeconfig, report,
                                     nodes=nodes, kube_scheduler=False,
                                     apiserver_args=apiserver_args)
