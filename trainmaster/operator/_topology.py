"""Topology labels on real nodes: the operator gives every GPU node its
`topology.trainmaster.io/<level>` labels, which the scheduler places gangs by.

Where a level's value comes from, first match wins:
1. the spec's switch tree, when it names the node (its switches at each level);
2. `topology.nodeLabels[level]`: a label the cluster already has (Kueue TAS, Volcano
   HyperNode, a cloud's placement labels), copied over;
3. a `topology.trainmaster.io/<level>` label someone already set: kept as it is.
A GPU node left with any level unknown is reported (a `TopologyUnknown` Event on the Node,
the `trainmaster_operator_node_topology_known` gauge), never silently put in one domain.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from trainmaster.objects import GPU_RESOURCE, topology_label
from trainmaster.spec import ClusterSpec


@dataclass(frozen=True)
class TopologyVerdict:
    patch: dict[str, str]
    """Labels to set (only those that differ from the node's)."""
    unknown: tuple[str, ...]
    """Levels no source gave a value for."""
    source: str
    """`tree`, `nodeLabels`, `labels` (already set) or `none`."""


class TopologyBook:
    """The spec's node -> switches map, built once per spec version."""

    def __init__(self) -> None:
        self._version: str | None = None
        self._tree: dict[str, tuple[str, ...]] = {}

    def tree(self, version: str, spec: ClusterSpec) -> Mapping[str, tuple[str, ...]]:
        if version != self._version:
            self._tree = {n.name: n.switches for n in spec.nodes}
            self._version = version
        return self._tree


def has_gpus(node: Mapping[str, Any]) -> bool:
    raw = ((node.get("status") or {}).get("allocatable") or {}).get(GPU_RESOURCE, "0")
    try:
        return int(str(raw)) > 0
    except ValueError:
        return False


def judge_topology(node: Mapping[str, Any], spec: ClusterSpec,
                   tree: Mapping[str, tuple[str, ...]]) -> TopologyVerdict:
    meta = node.get("metadata") or {}
    labels: Mapping[str, str] = meta.get("labels") or {}
    levels = spec.topology.levels
    want: dict[str, str] = {}
    source = "none"
    switches = tree.get(str(meta.get("name", "")))
    if switches is not None:
        want = {topology_label(lv): sw for lv, sw in zip(levels, switches, strict=False)}
        source = "tree"
    else:
        mapped = spec.topology.node_labels
        for level in levels:
            key = mapped.get(level)
            if key and labels.get(key):
                want[topology_label(level)] = labels[key]
                source = "nodeLabels"
    unknown = tuple(lv for lv in levels
                    if not want.get(topology_label(lv)) and not labels.get(topology_label(lv)))
    if source == "none" and not unknown:
        source = "labels"
    patch = {k: v for k, v in want.items() if labels.get(k) != v}
    return TopologyVerdict(patch, unknown, source)
