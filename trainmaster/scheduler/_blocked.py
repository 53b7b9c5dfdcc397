"""The nodes reserved for starving gangs during one scheduling cycle.

Why: a cycle hands the growing blocked set to the placer for every gang behind a
starving one. As a plain set of names, every placement turned the whole set into
indices and masked them out of a copy of its eligibility mask: O(blocked) per gang, and
with whole leaves, spines or the cluster reserved that is thousands of nodes per gang
per cycle. ``BlockedNodes`` is still a set of names (``Collection[str]``, what a
``Placer`` takes), but it also keeps the indices in the order they were blocked and,
per eligibility mask, the masked copy, brought up to date with only the nodes blocked
since it was last asked for. Within a cycle the set only grows and the snapshot's node
indices do not move (the cycle runs without yielding); if a node change happens all the
same (``node_version``), the indices and masks are rebuilt from the names.
"""

from __future__ import annotations

from collections.abc import Iterable, Iterator
from collections.abc import Set as AbstractSet

from ._snapshot import ClusterSnapshot


class BlockedNodes(AbstractSet[str]):
    """A growing set of node names with their snapshot indices (see the module doc)."""

    def __init__(self, snapshot: ClusterSnapshot, names: Iterable[str] = ()) -> None:
        self.snapshot = snapshot
        self._names: set[str] = set()
        self._order: list[int] = []
        self._version = snapshot.node_version
        # id(mask) -> (mask, masked copy, how many of _order are applied to the copy)
        self._masked: dict[int, tuple[bytes | bytearray, bytearray, int]] = {}
        self.update(names)

    def __contains__(self, name: object) -> bool:
        return name in self._names

    def __iter__(self) -> Iterator[str]:
        return iter(self._names)

    def __len__(self) -> int:
        return len(self._names)

    def update(self, names: Iterable[str]) -> None:
        """Block ``names`` too (names the snapshot does not know are kept as names only)."""
        self._sync()
        index = self.snapshot.node_index_map
        for name in names:
            if name not in self._names:
                self._names.add(name)
                i = index.get(name)
                if i is not None:
                    self._order.append(i)

    def _sync(self) -> None:
        """Rebuild the indices if the snapshot's nodes changed since they were taken."""
        version = self.snapshot.node_version
        if version != self._version:
            self._version = version
            self._order = self.snapshot.indices(self._names)
            self._masked = {}

    @property
    def order(self) -> list[int]:
        """Indices of the blocked nodes, in the order they were blocked (read-only): a
        caller that remembers how many it has seen reads only the new ones."""
        self._sync()
        return self._order

    def masked(self, mask: bytes | bytearray) -> bytes | bytearray:
        """``mask`` with every blocked node set to 0: ``mask`` itself if none is blocked,
        else a copy kept for the next call with the same mask and updated with the nodes
        blocked since (O(new)). Read-only: callers must not change it."""
        order = self.order
        if not order:
            return mask
        entry = self._masked.get(id(mask))
        if entry is None or entry[0] is not mask:
            entry = (mask, bytearray(mask), 0)
        copy, done = entry[1], entry[2]
        for k in range(done, len(order)):
            copy[order[k]] = 0
        self._masked[id(mask)] = (mask, copy, len(order))
        return copy
