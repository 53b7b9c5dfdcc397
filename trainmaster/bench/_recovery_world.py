"""The recovery benchmark's world: a local control plane (its own unless given one) and
the operator world the tests use too (``trainmaster.testworld``): a namespace with
the cluster-spec ConfigMap and a checkpoint volume, and the operator as a separate
process, as it runs in production. Everything is undone on exit, failures included.
"""

from __future__ import annotations

import contextlib
import tempfile
import uuid
from collections.abc import Callable
from pathlib import Path
from typing import Any

from trainmaster.api import API_VERSION, CLUSTER_KIND
from trainmaster.spec import ClusterSpec, validate_data
from trainmaster.testworld import OperatorWorld

Report = Callable[[str], None]


def bench_spec_doc(nodes: int) -> dict[str, Any]:
    """Bench-stack nodes (8 GPUs, 8 rails), leaves of 8, placed by the stock kube-scheduler."""
    leaves = max(1, -(-nodes // 8))
    return {
        "apiVersion": API_VERSION,
        "kind": CLUSTER_KIND,
        "metadata": {"name": "recovery"},
        "topology": {
            "levels": ["spine", "leaf"],
            "node": {"gpus": 8, "gpuModel": "nvidia-h100-80gb", "nics": 8, "cpu": 128,
                     "memory": "2048Gi", "localDisk": "15Ti"},
            "generate": {"switchesPerLevel": [1, leaves], "nodesPerLeaf": 8},
        },
        "networks": {
            "compute": {"fabric": "infiniband",
                        "rails": [{"subnet": f"10.{r}.0.0/16"} for r in range(8)]},
            "storage": {"subnet": "10.8.0.0/16"},
        },
        "scheduler": {"name": "default-scheduler"},
    }


def local_cluster(nodes: int, kubeconfig: Path | None, report: Report
                  ) -> contextlib.AbstractContextManager[Path]:
    """A kubeconfig: the given one, or that of a fresh local cluster of ``nodes`` kwok
    nodes with kube-scheduler (stopped after)."""
    from trainmaster import cluster

    return cluster.temporary_cluster(bench_spec_doc(nodes), kubeconfig, report,
                                     nodes=nodes, kube_scheduler=True)


class World(OperatorWorld):
    """The benchmark's operator world (see ``OperatorWorld``) on a bench-stack spec."""

    def __init__(self, kubeconfig: Path, nodes: int, report: Report) -> None:
        namespace = f"tm-recovery-{uuid.uuid4().hex[:6]}"
        doc = bench_spec_doc(nodes)
        doc["metadata"]["namespace"] = namespace
        spec: ClusterSpec = validate_data(doc, "recovery bench")
        super().__init__(kubeconfig, spec, Path(tempfile.gettempdir()) /
                         f"{namespace}-operator.log")
        self.report = report

    def operator_alive(self) -> bool:
        return self.process is not None and self.process.alive()

    def close(self) -> None:
        try:
            super().close()
        finally:
            self.log.unlink(missing_ok=True)
