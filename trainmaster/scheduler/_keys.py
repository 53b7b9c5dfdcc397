"""Label, annotation, condition and reason keys the scheduler reads and writes:
re-exported from trainmaster.api, which defines each once (and, unlike trainmaster.objects,
loads no spec model: a scheduler start stays as fast as when these strings were copied
here)."""

from __future__ import annotations

from trainmaster.api import (
    CHECKPOINT_ANNOTATION,
    CLUSTER_DOMAIN,
    CLUSTER_QUEUE_NOT_FOUND,
    DATASET_LABEL_PREFIX,
    DATASETS_ANNOTATION,
    DISRUPTION_TARGET,
    EVENT_PREEMPTED,
    GPU_RESOURCE,
    HOSTNAME_LABEL,
    LOCAL_QUEUE_NOT_FOUND,
    MAX_MEMBERS_ANNOTATION,
    POD_GROUP_LABEL,
    POD_SCHEDULED,
    PODGROUP_API_VERSION,
    PODGROUP_KIND,
    PODGROUP_PLURAL,
    PREEMPT_LOWER,
    PREEMPTION_BY_SCHEDULER,
    QUEUE_LABEL,
    TOPOLOGY_DOMAIN_ANNOTATION,
    TOPOLOGY_MODE_ANNOTATION,
    TOPOLOGY_PREFIX,
    topology_label,
)

__all__ = [
    "CHECKPOINT_ANNOTATION",
    "CLUSTER_DOMAIN",
    "CLUSTER_QUEUE_NOT_FOUND",
    "DATASETS_ANNOTATION",
    "DATASET_LABEL_PREFIX",
    "DISRUPTION_TARGET",
    "EVENT_PREEMPTED",
    "GPU_RESOURCE",
    "HOSTNAME_LABEL",
    "LOCAL_QUEUE_NOT_FOUND",
    "MAX_MEMBERS_ANNOTATION",
    "PODGROUP_API_VERSION",
    "PODGROUP_KIND",
    "PODGROUP_PLURAL",
    "POD_GROUP_LABEL",
    "POD_SCHEDULED",
    "PREEMPTION_BY_SCHEDULER",
    "PREEMPT_LOWER",
    "QUEUE_LABEL",
    "TOPOLOGY_DOMAIN_ANNOTATION",
    "TOPOLOGY_MODE_ANNOTATION",
    "TOPOLOGY_PREFIX",
    "topology_label",
]
