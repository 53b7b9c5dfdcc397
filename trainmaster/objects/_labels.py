"""Label and annotation keys trainmaster writes and reads, in one place."""

from __future__ import annotations

DOMAIN = "trainmaster.io"
TOPOLOGY_PREFIX = "topology.trainmaster.io/"
"""Node label per switch level: topology.trainmaster.io/<level> = <switch name>."""
GPU_MODEL = f"{DOMAIN}/gpu-model"
GPU_RESOURCE = "nvidia.com/gpu"
RDMA_PREFIX = "rdma/"
KWOK_NODE_ANNOTATION = "kwok.x-k8s.io/node"
POD_GROUP_LABEL = "scheduling.x-k8s.io/pod-group"
QUEUE_LABEL = "kueue.x-k8s.io/queue-name"
"""The queue of a gang's PodGroup and pods (Kueue's LocalQueue label)."""
CHECKPOINT_ANNOTATION = f"{DOMAIN}/last-checkpoint-time"
"""On a gang's PodGroup: when the job last wrote a checkpoint (the scheduler's work lost)."""
UNHEALTHY_TAINT = f"{DOMAIN}/unhealthy"
FIELD_MANAGER = "trainmaster"


def topology_label(level: str) -> str:
    return f"{TOPOLOGY_PREFIX}{level}"


def app_labels(name: str, component: str, instance: str) -> dict[str, str]:
    """The recommended app.kubernetes.io labels for an object trainmaster manages."""
    return {
        "app.kubernetes.io/name": name,
        "app.kubernetes.io/component": component,
        "app.kubernetes.io/instance": instance,
        "app.kubernetes.io/part-of": "trainmaster",
        "app.kubernetes.io/managed-by": "trainmaster",
    }
