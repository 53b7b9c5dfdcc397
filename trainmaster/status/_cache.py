"""The dataset cache in `trainmaster status` and the web view: each node's state of each
dataset (warming, ready, failed with the reason, evicted), as the operator records it on
the node (trainmaster.operator._warm_targets), and the counts per dataset."""

from __future__ import annotations

import re
from collections import Counter
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field
from typing import Any

from trainmaster.api import CACHE_FAILED, CACHE_READY, CACHE_STATES
from trainmaster.operator import cache_states, node_name


@dataclass
class NodeCacheRow:
    node: str
    state: str
    reason: str = ""
    since: str = ""


@dataclass
class DatasetCache:
    dataset: str
    counts: dict[str, int] = field(default_factory=dict)
    """Nodes per state (warming, ready, failed, evicted)."""
    nodes: list[NodeCacheRow] = field(default_factory=list)
    """Every node with a state of the dataset, failed first, then warming, evicted, ready."""


_ORDER = {CACHE_FAILED: 0, "warming": 1, "evicted": 2, CACHE_READY: 3}


def _natural(text: str) -> list[Any]:
    return [int(p) if p.isdigit() else p for p in re.split(r"(\d+)", text)]


def dataset_caches(nodes: Iterable[Mapping[str, Any]]) -> list[DatasetCache]:
    rows: dict[str, list[NodeCacheRow]] = {}
    for node in nodes:
        for dataset, cache in cache_states(node).items():
            if cache.state is not None:
                rows.setdefault(dataset, []).append(
                    NodeCacheRow(node_name(node), cache.state, cache.reason, cache.time))
    out = []
    for dataset in sorted(rows):
        found = sorted(rows[dataset], key=lambda r: (_ORDER.get(r.state, 9), _natural(r.node)))
        counts = Counter(r.state for r in found)
        out.append(DatasetCache(dataset, {s: counts.get(s, 0) for s in CACHE_STATES}, found))
    return out
