"""Node objects for a spec's topology (the simulated nodes of a local cluster)."""

from __future__ import annotations

from typing import Any

from trainmaster.api import (
    GPU_MODEL_LABEL,
    GPU_RESOURCE,
    HOSTNAME_LABEL,
    KWOK_NODE_ANNOTATION,
    topology_label,
)
from trainmaster.objects._networks import rdma_resources
from trainmaster.spec import ClusterSpec, ResolvedNode


def node_labels(spec: ClusterSpec, node: ResolvedNode) -> dict[str, str]:
    labels = {
        HOSTNAME_LABEL: node.name,
        "kubernetes.io/os": "linux",
        "kubernetes.io/arch": "amd64",
        "type": "kwok",
        GPU_MODEL_LABEL: node.gpu_model,
        # What the NVIDIA GPU operator labels real GPU nodes with; node agents select on it.
        "nvidia.com/gpu.present": "true" if node.gpus else "false",
    }
    for level, switch in zip(spec.topology.levels, node.switches, strict=False):
        labels[topology_label(level)] = switch
    return labels


def node_capacity(spec: ClusterSpec, node: ResolvedNode) -> dict[str, str]:
    capacity = {
        "cpu": str(node.cpu),
        "memory": node.memory,
        "ephemeral-storage": node.local_disk,
        "pods": str(node.max_pods),
        GPU_RESOURCE: str(node.gpus),
    }
    # Shared RDMA devices: every pod on the node may use each rail, so one slot per GPU.
    for resource in rdma_resources(spec)[: node.nics]:
        capacity[resource] = str(max(node.gpus, 1))
    return capacity


def build_node(spec: ClusterSpec, node: ResolvedNode) -> dict[str, Any]:
    capacity = node_capacity(spec, node)
    return {
        "apiVersion": "v1",
        "kind": "Node",
        "metadata": {
            "name": node.name,
            "labels": node_labels(spec, node),
            "annotations": {KWOK_NODE_ANNOTATION: "fake", "node.alpha.kubernetes.io/ttl": "0"},
        },
        "spec": {},
        "status": {
            "capacity": capacity,
            "allocatable": capacity,
            "nodeInfo": {
                "architecture": "amd64",
                "operatingSystem": "linux",
                "kubeletVersion": "fake",
                "kubeProxyVersion": "fake",
                "containerRuntimeVersion": "kwok",
            },
        },
    }


def build_nodes(spec: ClusterSpec) -> list[dict[str, Any]]:
    """One simulated Node per node of the spec's topology."""
    return [build_node(spec, node) for node in spec.nodes]
