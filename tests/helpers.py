"""Builders shared by the tests: spec documents and small object factories."""

from __future__ import annotations

import contextlib
import copy
import uuid
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import yaml

from trainmaster.kubeclient import SyncKube, namespace_path

ROOT = Path(__file__).resolve().parent.parent
STACKS = ROOT / "stacks"


def stack_doc(name: str = "dev") -> dict[str, Any]:
    """A fresh, mutable copy of an example stack's spec document."""
    return copy.deepcopy(yaml.safe_load((STACKS / name / "cluster.yaml").read_text()))


def small_spec_doc(
    name: str, leaves: int = 2, nodes_per_leaf: int = 4, jobs: list[dict[str, Any]] | None = None
) -> dict[str, Any]:
    """A minimal valid spec with one spine and `leaves` leaves."""
    return {
        "apiVersion": "trainmaster.io/v1alpha1",
        "kind": "TrainingCluster",
        "metadata": {"name": name},
        "topology": {
            "levels": ["spine", "leaf"],
            "node": {"gpus": 8, "nics": 2, "cpu": 64, "memory": "512Gi", "localDisk": "4Ti"},
            "generate": {"switchesPerLevel": [1, leaves], "nodesPerLeaf": nodes_per_leaf},
        },
        "networks": {
            "compute": {
                "fabric": "infiniband",
                "rails": [{"subnet": "10.100.0.0/20"}, {"subnet": "10.100.16.0/20"}],
            }
        },
        "cache": {
            "capacity": "1Ti",
            "datasets": [{"name": "tiny", "source": "s3://datasets/tiny", "size": "1Gi"}],
        },
        "jobs": jobs or [],
    }


def write_spec(path: Path, doc: dict[str, Any]) -> Path:
    path.write_text(yaml.safe_dump(doc, sort_keys=False))
    return path


@contextlib.contextmanager
def throwaway_namespace(kube: SyncKube, prefix: str) -> Iterator[str]:
    """A namespace with a random name for one test, deleted afterwards."""
    name = f"{prefix}-{uuid.uuid4().hex[:8]}"
    kube.post(namespace_path(), {"apiVersion": "v1", "kind": "Namespace",
                                 "metadata": {"name": name}})
    try:
        yield name
    finally:
        kube.delete(namespace_path(name), missing_ok=True)
