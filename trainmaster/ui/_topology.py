"""The topology view: spine -> leaf -> node, GPUs used and free, why a node takes no
work, and which gang holds it. One pass over nodes and pods; the top page shows one row
per leaf (aggregates, so 10,000 nodes are 500 rows), a leaf's page its nodes."""

from __future__ import annotations

from collections import defaultdict
from dataclasses import dataclass, field
from typing import Any

from trainmaster.api import (
    GPU_RESOURCE,
    NODE_READY,
    POD_GROUP_LABEL,
    TOPOLOGY_PREFIX,
    UNHEALTHY_TAINT,
)
from trainmaster.operator import fenced_record
from trainmaster.status import gpu_request, topology_levels
from trainmaster.ui._world import World

FENCED, CORDONED, NOT_READY, READY = "fenced", "cordoned", "NotReady", "ready"


@dataclass
class NodeCell:
    name: str
    path: tuple[str, ...]
    """Its switches, top level first (spine, leaf)."""
    gpus: int
    used: int
    state: str
    """ready, fenced, cordoned or NotReady (the first that applies, in that order of
    precedence: a fence is the operator's, a cordon a person's)."""
    cause: str
    gangs: list[str] = field(default_factory=list)

    @property
    def free(self) -> int:
        return max(self.gpus - self.used, 0) if self.state == READY else 0

    @property
    def percent(self) -> int:
        return round(100 * self.used / self.gpus) if self.gpus else 0


@dataclass
class LeafRow:
    """One switch at the lowest level, or a higher one, with its nodes' sums."""

    name: str
    parent: str | None
    nodes: int = 0
    gpus: int = 0
    used: int = 0
    free: int = 0
    fenced: int = 0
    cordoned: int = 0
    not_ready: int = 0
    gangs: set[str] = field(default_factory=set)

    @property
    def percent(self) -> int:
        return round(100 * self.used / self.gpus) if self.gpus else 0

    def add(self, cell: NodeCell) -> None:
        self.nodes += 1
        self.gpus += cell.gpus
        self.used += cell.used
        self.free += cell.free
        self.fenced += cell.state == FENCED
        self.cordoned += cell.state == CORDONED
        self.not_ready += cell.state == NOT_READY
        self.gangs.update(cell.gangs)


@dataclass
class Topology:
    levels: list[str]
    spines: list[LeafRow]
    """The top level's switches (whatever the top level is called)."""
    leaves: dict[str, list[LeafRow]]
    """Top-level switch -> its lowest-level switches, natural order."""
    cells: dict[str, list[NodeCell]]
    """Lowest-level switch -> its nodes."""
    total: LeafRow


def natural(text: str) -> list[Any]:
    import re

    return [int(p) if p.isdigit() else p for p in re.split(r"(\d+)", text)]


def holds_capacity(pod: dict[str, Any]) -> bool:
    phase = (pod.get("status") or {}).get("phase")
    return bool((pod.get("spec") or {}).get("nodeName")) and phase not in ("Succeeded",
                                                                             "Failed")


def node_state(node: dict[str, Any]) -> tuple[str, str]:
    spec = node.get("spec") or {}
    taint = next((t for t in spec.get("taints") or [] if t.get("key") == UNHEALTHY_TAINT),
                 None)
    if taint is not None:
        record = fenced_record(node) or {}
        return FENCED, str(record.get("reason") or taint.get("value") or "unhealthy")
    if spec.get("unschedulable"):
        return CORDONED, "cordoned (spec.unschedulable)"
    for cond in (node.get("status") or {}).get("conditions") or []:
        if cond.get("type") == NODE_READY:
            if cond.get("status") == "True":
                return READY, ""
            why = ": ".join(p for p in (cond.get("reason"), cond.get("message")) if p)
            return NOT_READY, f"Ready={cond.get('status')}" + (f" ({why})" if why else "")
    return NOT_READY, "no Ready condition"


def build_topology(world: World) -> Topology:
    levels = topology_levels(world.nodes)
    used: dict[str, int] = defaultdict(int)
    gangs: dict[str, set[str]] = defaultdict(set)
    for pod in world.pods:
        if not holds_capacity(pod):
            continue
        node = pod["spec"]["nodeName"]
        used[node] += gpu_request(pod)
        meta = pod.get("metadata") or {}
        group = (meta.get("labels") or {}).get(POD_GROUP_LABEL)
        if group:
            gangs[node].add(f"{meta.get('namespace', '')}/{group}")
    top, leaf = (levels[0], levels[-1]) if levels else (None, None)
    spines: dict[str, LeafRow] = {}
    leaves: dict[str, LeafRow] = {}
    cells: dict[str, list[NodeCell]] = defaultdict(list)
    total = LeafRow("cluster", None)
    for node in world.nodes:
        meta = node.get("metadata") or {}
        labels = meta.get("labels") or {}
        name = meta.get("name", "")
        try:
            gpus = int(((node.get("status") or {}).get("allocatable") or {})
                       .get(GPU_RESOURCE, 0))
        except (TypeError, ValueError):
            gpus = 0
        state, cause = node_state(node)
        path = tuple(labels.get(TOPOLOGY_PREFIX + level, "-") for level in levels)
        cell = NodeCell(name, path, gpus, used.get(name, 0), state, cause,
                        sorted(gangs.get(name, ())))
        spine_name = labels.get(TOPOLOGY_PREFIX + top, "-") if top else "-"
        leaf_name = labels.get(TOPOLOGY_PREFIX + leaf, "-") if leaf else "-"
        spines.setdefault(spine_name, LeafRow(spine_name, None)).add(cell)
        leaves.setdefault(leaf_name, LeafRow(leaf_name, spine_name)).add(cell)
        cells[leaf_name].append(cell)
        total.add(cell)
    by_spine: dict[str, list[LeafRow]] = defaultdict(list)
    for row in leaves.values():
        by_spine[row.parent or "-"].append(row)
    for rows in by_spine.values():
        rows.sort(key=lambda r: natural(r.name))
    for nodes in cells.values():
        nodes.sort(key=lambda c: natural(c.name))
    return Topology(levels, sorted(spines.values(), key=lambda r: natural(r.name)),
                    dict(by_spine), dict(cells), total)
