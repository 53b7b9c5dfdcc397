"""Topology labels on real nodes: the operator gives every GPU node its
`topology.trainmaster.io/<level>` labels, which the scheduler places gangs by.

Where a level's value comes from, first match wins:
1. the spec's switch tree, when it names the node in an explicit node list
   (`topology.switches[..].nodes: [{name: ...}]`; generated names such as `node-000` are the
   simulator's, never matched against a real cluster's nodes);
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

from trainmaster.api import GPU_RESOURCE, topology_label
from trainmaster.spec import ClusterSpec, Switch


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
            self._tree = named_nodes(spec.topology.switches or [])
            self._version = version
        return self._tree


def named_nodes(switches: list[Switch], path: tuple[str, ...] = ()
                ) -> dict[str, tuple[str, ...]]:
    """Node name -> its switches top down, for the nodes the tree names explicitly."""
    out: dict[str, tuple[str, ...]] = {}
    for switch in switches:
        here = (*path, switch.name)
        if switch.switches:
            out.update(named_nodes(switch.switches, here))
        elif isinstance(switch.nodes, list):
            out.update((node.name, here) for node in switch.nodes)
    return out


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
