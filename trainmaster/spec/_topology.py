"""Expand the spec's switch tree into a flat, ordered node list."""

from __future__ import annotations

from typing import Any

from trainmaster.spec._model import NodeOverride, ResolvedNode, Switch, Topology


def _node(
    name: str,
    base: dict[str, Any],
    switches: tuple[str, ...],
    override: NodeOverride | None = None,
) -> ResolvedNode:
    values = base
    if override is not None:
        values = {**base, **override.model_dump(exclude_none=True, exclude={"name"})}
    return ResolvedNode(name=name, switches=switches, **values)


def generated_switch_name(level: str, index: int) -> str:
    return f"{level}-{index}"


def resolve_nodes(topology: Topology) -> list[ResolvedNode]:
    """Every node, in tree order, with its switch path. Assumes a schema-valid topology."""
    if topology.generate is not None:
        return _resolve_generated(topology)
    nodes: list[ResolvedNode] = []
    base = topology.node.model_dump()
    for switch in topology.switches or []:
        _walk(switch, (), base, nodes)
    return nodes


def _resolve_generated(topology: Topology) -> list[ResolvedNode]:
    gen = topology.generate
    assert gen is not None
    levels = topology.levels
    counts = gen.switches_per_level
    total_leaves = 1
    for c in counts:
        total_leaves *= c
    width = max(3, len(str(total_leaves * gen.nodes_per_leaf - 1)))
    base = topology.node.model_dump()
    nodes: list[ResolvedNode] = []
    # Index switches globally per level so every name is unique: spine-0..4, leaf-0..24.
    paths: list[tuple[str, ...]] = [()]
    for depth, count in enumerate(counts):
        level = levels[depth] if depth < len(levels) else f"level{depth}"
        paths = [
            (*path, generated_switch_name(level, i * count + j))
            for i, path in enumerate(paths)
            for j in range(count)
        ]
    for path in paths:
        for _ in range(gen.nodes_per_leaf):
            nodes.append(_node(f"node-{len(nodes):0{width}d}", base, path))
    return nodes


def _walk(
    switch: Switch, path: tuple[str, ...], base: dict[str, Any], nodes: list[ResolvedNode]
) -> None:
    here = (*path, switch.name)
    for child in switch.switches or []:
        _walk(child, here, base, nodes)
    if isinstance(switch.nodes, int):
        for i in range(switch.nodes):
            nodes.append(_node(f"{switch.name}-node-{i}", base, here))
    elif switch.nodes is not None:
        for override in switch.nodes:
            nodes.append(_node(override.name, base, here, override))


def switch_paths(topology: Topology) -> list[tuple[str, ...]]:
    """Path of every switch (top level first), e.g. ("spine-0",), ("spine-0", "leaf-1")."""
    seen: dict[tuple[str, ...], None] = {}
    for node in resolve_nodes(topology):
        for depth in range(1, len(node.switches) + 1):
            seen.setdefault(node.switches[:depth], None)
    return list(seen)
