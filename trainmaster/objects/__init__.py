"""Pure functions from a validated spec to Kubernetes objects (plain dicts).

This is the one place where the spec becomes objects: the Pulumi components, `trainmaster
render` and the operator all call these builders. No Kubernetes client imports here.
"""

from trainmaster.objects._labels import (
    FIELD_MANAGER,
    GPU_MODEL,
    GPU_RESOURCE,
    KWOK_NODE_ANNOTATION,
    POD_GROUP_LABEL,
    TOPOLOGY_PREFIX,
    UNHEALTHY_TAINT,
    app_labels,
    topology_label,
)
from trainmaster.objects._networks import rail_names, rdma_resources
from trainmaster.objects._nodes import build_node, build_nodes

__all__ = [
    "FIELD_MANAGER",
    "GPU_MODEL",
    "GPU_RESOURCE",
    "KWOK_NODE_ANNOTATION",
    "POD_GROUP_LABEL",
    "TOPOLOGY_PREFIX",
    "UNHEALTHY_TAINT",
    "app_labels",
    "build_node",
    "build_nodes",
    "rail_names",
    "rdma_resources",
    "topology_label",
]
