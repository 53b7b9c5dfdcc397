"""The benchmark's workload: P pods of 4 GPUs in gangs of 1..32, drawn from a seed.

Every contender gets the same gangs (same sizes, same names) in a fresh namespace. Each
gang is a scheduler-plugins PodGroup (minMember = its size) whose topology follows the
bench stack's policy: a gang of one must sit on one node, larger gangs prefer one leaf.
kube-scheduler ignores PodGroups (it has no gangs); the pods are the same apart from
``schedulerName``, and, for the affinity variant, the preferred inter-pod affinity a
kube-scheduler user would write to keep a gang in one leaf (``gang_affinity``).

The upstream variant expresses the same gangs through the upstream gang API: an
``scheduling.k8s.io/v1beta1`` PodGroup (``minCount`` = its size) that its pods name in
``spec.schedulingGroup`` instead of the label. That API can only *require* a domain, so
the group carries no constraint and the scheduler's policy by size gives it the same
topology as the annotations above (the bench stack's policy: one node required for a
gang of one, else one leaf preferred).
"""

from __future__ import annotations

import math
import random
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

from trainmaster.api import (
    BENCH_LABEL,
    GPU_RESOURCE,
    POD_GROUP_LABEL,
    TOPOLOGY_DOMAIN_ANNOTATION,
    TOPOLOGY_MODE_ANNOTATION,
    WORKLOAD_API_VERSION,
    topology_label,
)

GPUS_PER_POD = 4
MAX_GANG = 32


@dataclass(frozen=True, slots=True)
class GangSpec:
    name: str
    size: int

    @property
    def domain(self) -> str:
        return "node" if self.size == 1 else "leaf"

    @property
    def mode(self) -> str:
        return "required" if self.size == 1 else "preferred"


def gang_sizes(pods: int, seed: int, largest: int = MAX_GANG) -> list[int]:
    """Sizes uniform in 1..largest until ``pods`` are used (the last one is cut short)."""
    rng = random.Random(seed)
    sizes: list[int] = []
    left = pods
    while left > 0:
        size = min(rng.randint(1, largest), left)
        sizes.append(size)
        left -= size
    return sizes


def workload(pods: int, seed: int) -> list[GangSpec]:
    return [GangSpec(f"g{i:03d}", size) for i, size in enumerate(gang_sizes(pods, seed))]


def leaves_needed(size: int, leaf_gpus: int) -> int:
    """Fewest leaves a gang of ``size`` pods can fit in (at least one)."""
    return max(1, math.ceil(size * GPUS_PER_POD / leaf_gpus))


def pod_group(gang: GangSpec, namespace: str) -> dict[str, Any]:
    return {
        "apiVersion": "scheduling.x-k8s.io/v1alpha1",
        "kind": "PodGroup",
        "metadata": {
            "name": gang.name,
            "namespace": namespace,
            "labels": {BENCH_LABEL: "true"},
            "annotations": {
                TOPOLOGY_DOMAIN_ANNOTATION: gang.domain,
                TOPOLOGY_MODE_ANNOTATION: gang.mode,
            },
        },
        "spec": {"minMember": gang.size},
    }


def upstream_pod_group(gang: GangSpec, namespace: str) -> dict[str, Any]:
    """The gang as an upstream PodGroup (module doc)."""
    return {
        "apiVersion": WORKLOAD_API_VERSION,
        "kind": "PodGroup",
        "metadata": {"name": gang.name, "namespace": namespace,
                     "labels": {BENCH_LABEL: "true"}},
        "spec": {"schedulingPolicy": {"gang": {"minCount": gang.size}}},
    }


def gang_affinity(gang: GangSpec, leaf_level: str = "leaf") -> dict[str, Any]:
    """Prefer (weight 100) the leaf of the gang's members already placed."""
    return {"podAffinity": {"preferredDuringSchedulingIgnoredDuringExecution": [{
        "weight": 100,
        "podAffinityTerm": {
            "labelSelector": {"matchLabels": {POD_GROUP_LABEL: gang.name}},
            "topologyKey": topology_label(leaf_level),
        },
    }]}}


def pod(
    gang: GangSpec, index: int, namespace: str, scheduler: str, rdma: Sequence[str] = (),
    affinity: bool = False, upstream: bool = False,
) -> dict[str, Any]:
    """One member; ``rdma`` names the RDMA resources every node has (one of each);
    ``affinity`` adds ``gang_affinity``; ``upstream`` names the gang's upstream PodGroup
    in ``spec.schedulingGroup`` instead of the label."""
    requests = {
        GPU_RESOURCE: str(GPUS_PER_POD),
        "cpu": "16",
        "memory": "64Gi",
        **{resource: "1" for resource in rdma},
    }
    body: dict[str, Any] = {
        "apiVersion": "v1",
        "kind": "Pod",
        "metadata": {
            "name": f"{gang.name}-{index}",
            "namespace": namespace,
            "labels": {BENCH_LABEL: "true", POD_GROUP_LABEL: gang.name},
        },
        "spec": {
            "schedulerName": scheduler,
            "terminationGracePeriodSeconds": 0,
            "containers": [
                {
                    "name": "trainer",
                    "image": "busybox:1.36",
                    "resources": {"requests": requests, "limits": dict(requests)},
                }
            ],
            "tolerations": [
                {"key": GPU_RESOURCE, "operator": "Exists", "effect": "NoSchedule"}
            ],
        },
    }
    if affinity:
        body["spec"]["affinity"] = gang_affinity(gang)
    if upstream:
        del body["metadata"]["labels"][POD_GROUP_LABEL]
        body["spec"]["schedulingGroup"] = {"podGroupName": gang.name}
    return body
