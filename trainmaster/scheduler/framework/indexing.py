"""Helpers for filters that answer from the cluster state's node indexes
(``IndexedFilter``)."""

from __future__ import annotations

from collections.abc import Set as AbstractSet

from .interface import NodeIndex


def outside_all(index: NodeIndex, sets: list[AbstractSet[int]]) -> list[AbstractSet[int]]:
    """The one group of nodes outside the intersection of ``sets`` (every node a
    conjunction of label matches may reject); none when there is nothing to match."""
    if not sets:
        return []  # nothing to match: it passes every node
    if len(sets) == 1:
        return [index.all_nodes - sets[0]]
    sets.sort(key=len)
    first = sets[0]
    common = first.intersection(*sets[1:]) if isinstance(first, set) else (
        set(first).intersection(*sets[1:]))
    return [index.all_nodes - common]
