"""Where a stack's datasets are warm, read from the cluster as it is: for each dataset,
every node that a job reading it may use (the operator's own placement check), the state
that node's label `dataset.trainmaster.io/<dataset>` holds, and the warm-up pods still
Pending. `make demo` prints it and its test asserts it (issue 43: every node a reader may
use is ready, and no warm-up pod waits forever)."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from trainmaster.api import CACHE_READY, DATASET_LABEL, dataset_label
from trainmaster.kubeclient import SyncKube, node_path, pod_path
from trainmaster.operator import job_can_use, readers
from trainmaster.spec import ClusterSpec


@dataclass(frozen=True)
class DatasetNodes:
    dataset: str
    states: dict[str, str]
    """Each node a reader may use -> its label's state ("" when it has none)."""
    readers: dict[str, tuple[str, ...]]
    """Each of those nodes -> the jobs reading the dataset that may use it."""
    pending: tuple[str, ...]
    """The dataset's warm-up pods in phase Pending."""

    @property
    def ready(self) -> bool:
        return bool(self.states) and not self.pending and all(
            s == CACHE_READY for s in self.states.values())

    def lines(self) -> list[str]:
        ready = sum(s == CACHE_READY for s in self.states.values())
        out = [f"dataset {self.dataset}: ready on {ready} of the {len(self.states)} nodes its "
               f"readers may use; {len(self.pending)} warm-up pods Pending"]
        out += [f"  {node:<16} {state or '-':<8} (readers: {', '.join(self.readers[node])})"
                for node, state in sorted(self.states.items())]
        return out


def dataset_nodes(kube: SyncKube, spec: ClusterSpec, dataset: str) -> DatasetNodes:
    nodes: list[dict[str, Any]] = kube.list(node_path())
    jobs = readers(spec.jobs, dataset)
    states: dict[str, str] = {}
    users: dict[str, tuple[str, ...]] = {}
    for node in nodes:
        may = tuple(j.name for j in jobs if job_can_use(j, node))
        if may:
            name = node["metadata"]["name"]
            users[name] = may
            states[name] = (node["metadata"].get("labels") or {}).get(dataset_label(dataset), "")
    pending = tuple(sorted(
        p["metadata"]["name"]
        for p in kube.list(pod_path(spec.metadata.namespace), f"{DATASET_LABEL}={dataset}")
        if (p.get("status") or {}).get("phase") == "Pending"))
    return DatasetNodes(dataset, states, users, pending)


def stack_datasets(kube: SyncKube, spec: ClusterSpec) -> list[DatasetNodes]:
    """Every dataset some job of the spec reads."""
    datasets = spec.cache.datasets if spec.cache is not None else []
    return [dataset_nodes(kube, spec, d.name) for d in datasets if readers(spec.jobs, d.name)]
