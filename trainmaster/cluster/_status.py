"""What a local cluster is doing: its processes, its nodes, GPU capacity per leaf."""

from __future__ import annotations

import re
from collections import defaultdict
from dataclasses import dataclass, field
from pathlib import Path

from trainmaster.api import GPU_RESOURCE, TOPOLOGY_PREFIX
from trainmaster.cluster import _processes as procs
from trainmaster.cluster._state import ClusterRecord
from trainmaster.kubeclient import SyncKube, node_path, pod_path
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
    with SyncKube.connect(Path(record.kubeconfig)) as kube:
        nodes = kube.list(node_path())
        pods = kube.list(pod_path(), params={"fieldSelector": "spec.nodeName!="})
    leaves: dict[str, LeafCapacity] = {}
    node_leaf: dict[str, str] = {}
    for node in nodes:
        meta, node_status = node["metadata"], node.get("status") or {}
        leaf = (meta.get("labels") or {}).get(leaf_label, "-")
        node_leaf[meta["name"]] = leaf
        cap = leaves.setdefault(leaf, LeafCapacity(leaf))
        cap.nodes += 1
        ready = any(c.get("type") == "Ready" and c.get("status") == "True"
                    for c in node_status.get("conditions") or [])
        cap.ready += int(ready)
        cap.gpus += int((node_status.get("allocatable") or {}).get(GPU_RESOURCE, "0"))
    used: dict[str, int] = defaultdict(int)
    for pod in pods:
        if (pod.get("status") or {}).get("phase") in ("Succeeded", "Failed"):
            continue
        spec = pod["spec"]
        for container in spec.get("containers") or []:
            requests = (container.get("resources") or {}).get("requests") or {}
            used[node_leaf.get(spec.get("nodeName", ""), "-")] += int(
                requests.get(GPU_RESOURCE, 0))
    for leaf, cap in leaves.items():
        cap.gpus_used = used.get(leaf, 0)
    status.leaves = sorted(leaves.values(), key=lambda c: natural_key(c.leaf))
    status.nodes = sum(c.nodes for c in status.leaves)
    status.ready = sum(c.ready for c in status.leaves)
    return status
