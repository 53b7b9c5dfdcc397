"""What a local cluster is doing: its processes, its nodes, GPU capacity per leaf."""

from __future__ import annotations

import re
from collections import defaultdict
from dataclasses import dataclass, field
from pathlib import Path

from kubernetes import client

from trainmaster.cluster import _processes as procs
from trainmaster.cluster._state import ClusterRecord
from trainmaster.kube import sync_client
from trainmaster.objects import GPU_RESOURCE, TOPOLOGY_PREFIX
from trainmaster.spec import load_spec


def natural_key(name: str) -> list[int | str]:
    """Sort key that puts leaf-2 before leaf-10."""
    return [int(part) if part.isdigit() else part for part in re.split(r"(\d+)", name)]


@dataclass
class LeafCapacity:
    leaf: str
    nodes: int = 0
    ready: int = 0
    gpus: int = 0
    gpus_used: int = 0


@dataclass
class ClusterStatus:
    name: str
    kubeconfig: str
    processes: dict[str, bool]
    nodes: int
    ready: int
    leaves: list[LeafCapacity] = field(default_factory=list)


def cluster_status(state_dir: Path) -> ClusterStatus:
    record = ClusterRecord.load(state_dir)
    if record is None:
        raise procs.ClusterError(f"no local cluster at {state_dir}")
    alive = {p.name: procs.alive(p.pid) for p in record.processes}
    status = ClusterStatus(record.name, record.kubeconfig, alive, 0, 0)
    if not alive.get("kube-apiserver"):
        return status
    leaf_label = f"{TOPOLOGY_PREFIX}{load_spec(record.spec).topology.levels[-1]}"
    api = client.CoreV1Api(sync_client(Path(record.kubeconfig)))
    leaves: dict[str, LeafCapacity] = {}
    node_leaf: dict[str, str] = {}
    for node in api.list_node().items:
        leaf = (node.metadata.labels or {}).get(leaf_label, "-")
        node_leaf[node.metadata.name] = leaf
        cap = leaves.setdefault(leaf, LeafCapacity(leaf))
        cap.nodes += 1
        ready = any(
            c.type == "Ready" and c.status == "True" for c in (node.status.conditions or [])
        )
        cap.ready += int(ready)
        cap.gpus += int((node.status.allocatable or {}).get(GPU_RESOURCE, "0"))
    used: dict[str, int] = defaultdict(int)
    for pod in api.list_pod_for_all_namespaces(field_selector="spec.nodeName!=").items:
        if pod.status.phase in ("Succeeded", "Failed"):
            continue
        for container in pod.spec.containers:
            requests = (container.resources.requests or {}) if container.resources else {}
            used[node_leaf.get(pod.spec.node_name, "-")] += int(requests.get(GPU_RESOURCE, 0))
    for leaf, cap in leaves.items():
        cap.gpus_used = used.get(leaf, 0)
    status.leaves = sorted(leaves.values(), key=lambda c: natural_key(c.leaf))
    status.nodes = sum(c.nodes for c in status.leaves)
    status.ready = sum(c.ready for c in status.leaves)
    return status
