"""Label and annotation keys the runtime reads (the same strings trainmaster.objects writes).

Repeated here rather than imported: ``trainmaster.objects`` pulls in the spec model
(pydantic), which would add most of a second to every scheduler start and failover.
A unit test keeps both copies equal.
"""

from __future__ import annotations

POD_GROUP_LABEL = "scheduling.x-k8s.io/pod-group"
TOPOLOGY_PREFIX = "topology.trainmaster.io/"
TOPOLOGY_DOMAIN_ANNOTATION = "trainmaster.io/topology-domain"
TOPOLOGY_MODE_ANNOTATION = "trainmaster.io/topology-mode"
HOSTNAME_LABEL = "kubernetes.io/hostname"
PODGROUP_API_VERSION = "scheduling.x-k8s.io/v1alpha1"
QUEUE_LABEL = "kueue.x-k8s.io/queue-name"
"""The queue of a pod or PodGroup (Kueue's LocalQueue label)."""
CHECKPOINT_ANNOTATION = "trainmaster.io/last-checkpoint-time"
"""On a PodGroup: when its job last wrote a checkpoint (RFC 3339); preemption's work lost."""
PREEMPT_LOWER = "PreemptLowerPriority"


def topology_label(level: str) -> str:
    return f"{TOPOLOGY_PREFIX}{level}"
DATASETS_ANNOTATION = "trainmaster.io/datasets"
"""On a pod: the datasets it reads, comma separated (a score preference only)."""
DATASET_LABEL_PREFIX = "dataset.trainmaster.io/"
"""``<prefix><dataset>=true`` on a node whose cache holds the dataset."""
