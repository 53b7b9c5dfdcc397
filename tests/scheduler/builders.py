"""Builders for scheduler tests: sensible defaults, override what the test is about."""

from __future__ import annotations

from collections.abc import Iterable, Mapping

from trainmaster.scheduler import (
    CPU,
    GPU,
    MEMORY,
    PODS,
    ClusterState,
    Gang,
    NodeInfo,
    NodeSelectorRequirement,
    PodRequest,
    Taint,
    Toleration,
    TopologyConstraint,
    TopologyMode,
)

GIB = 1024**3
LEVELS = ("spine", "leaf")


def make_node(
    name: str = "node-0",
    *,
    gpus: int = 8,
    cpu: int = 96_000,
    memory: int = 1024 * GIB,
    pods: int = 110,
    extra: Mapping[str, int] | None = None,
    labels: Mapping[str, str] | None = None,
    taints: Iterable[Taint] = (),
    unschedulable: bool = False,
    topology: tuple[str, ...] = (),
    requested: Mapping[str, int] | None = None,
) -> NodeInfo:
    allocatable = {GPU: gpus, CPU: cpu, MEMORY: memory, PODS: pods, **(extra or {})}
    return NodeInfo(
        name=name,
        allocatable=allocatable,
        labels=dict(labels or {}),
        taints=tuple(taints),
        unschedulable=unschedulable,
        topology=topology,
        requested=dict(requested or {}),
    )


def make_pod(
    name: str = "pod-0",
    *,
    gpus: int = 4,
    cpu: int = 8_000,
    memory: int = 64 * GIB,
    extra: Mapping[str, int] | None = None,
    namespace: str = "default",
    gang: str | None = None,
    selector: Mapping[str, str] | None = None,
    affinity: Iterable[NodeSelectorRequirement] = (),
    tolerations: Iterable[Toleration] = (),
    priority: int = 0,
    created: float = 0.0,
) -> PodRequest:
    return PodRequest(
        name=name,
        namespace=namespace,
        requests={GPU: gpus, CPU: cpu, MEMORY: memory, **(extra or {})},
        node_selector=dict(selector or {}),
        affinity=tuple(affinity),
        tolerations=tuple(tolerations),
        priority=priority,
        creation_timestamp=created,
        gang=gang,
    )


def make_gang(
    name: str = "gang-0",
    size: int = 2,
    *,
    gpus: int = 4,
    cpu: int = 8_000,
    memory: int = 64 * GIB,
    level: str = "cluster",
    mode: str = "preferred",
    priority: int = 0,
    created: float = 0.0,
    min_member: int = 0,
    namespace: str = "default",
    selector: Mapping[str, str] | None = None,
    affinity: Iterable[NodeSelectorRequirement] = (),
    tolerations: Iterable[Toleration] = (),
) -> Gang:
    affinity, tolerations = tuple(affinity), tuple(tolerations)
    members = tuple(
        make_pod(
            f"{name}-{i}",
            gpus=gpus,
            cpu=cpu,
            memory=memory,
            namespace=namespace,
            gang=name,
            priority=priority,
            created=created,
            selector=selector,
            affinity=affinity,
            tolerations=tolerations,
        )
        for i in range(size)
    )
    return Gang(
        name=name,
        namespace=namespace,
        members=members,
        min_member=min_member,
        topology=TopologyConstraint(level, TopologyMode(mode)),
        priority=priority,
        creation_timestamp=created,
    )


def fabric_nodes(
    spines: int = 2, leaves: int = 2, per_leaf: int = 4, *, gpus: int = 8
) -> list[NodeInfo]:
    """Nodes ``s{S}-l{L}-n{N}`` under ``spine-S`` / ``leaf-L``."""
    return [
        make_node(f"s{s}-l{leaf}-n{n}", gpus=gpus, topology=(f"spine-{s}", f"leaf-{leaf}"))
        for s in range(spines)
        for leaf in range(leaves)
        for n in range(per_leaf)
    ]


def make_cluster(
    spines: int = 2, leaves: int = 2, per_leaf: int = 4, *, gpus: int = 8
) -> ClusterState:
    return ClusterState(fabric_nodes(spines, leaves, per_leaf, gpus=gpus), LEVELS)
