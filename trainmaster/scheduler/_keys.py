"""Label and annotation keys the runtime reads: re-exported from trainmaster.api, which
defines each once (and, unlike trainmaster.objects, loads no spec model: a scheduler start
stays as fast as when these strings were copied here)."""

from __future__ import annotations

from trainmaster.api import (
    CHECKPOINT_ANNOTATION,
    DATASET_LABEL_PREFIX,
    DATASETS_ANNOTATION,
    HOSTNAME_LABEL,
    POD_GROUP_LABEL,
    PODGROUP_API_VERSION,
    PREEMPT_LOWER,
    QUEUE_LABEL,
    TOPOLOGY_DOMAIN_ANNOTATION,
    TOPOLOGY_MODE_ANNOTATION,
    TOPOLOGY_PREFIX,
    topology_label,
)

__all__ = [
    "CHECKPOINT_ANNOTATION",
    "DATASETS_ANNOTATION",
    "DATASET_LABEL_PREFIX",
    "HOSTNAME_LABEL",
    "PODGROUP_API_VERSION",
    "POD_GROUP_LABEL",
    "PREEMPT_LOWER",
    "QUEUE_LABEL",
    "TOPOLOGY_DOMAIN_ANNOTATION",
    "TOPOLOGY_MODE_ANNOTATION",
    "TOPOLOGY_PREFIX",
    "topology_label",
]
