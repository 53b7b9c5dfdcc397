"""The nodes reserved for starving gangs during one scheduling cycle.

Why: a cycle hands the growing blocked set to the placer for every gang behind a
starving one. As a plain set of names, every placement turned the whole set into
indices and masked them out of a copy of its eligibility mask: O(blocked) per gang, and
with whole leaves, spines or the cluster reserved that is thousands of nodes per gang
per cycle. ``BlockedNodes`` is still a set of names (``Collection[str]``, what a
``Placer`` takes), but it also keeps

* the blocked indices as a set (``indices``: set operations against the snapshot's GPU
  buckets run in C),
* the same as one integer with the byte of each blocked node set to 1 (``bits``), so a
  masked copy of an eligibility mask is one integer AND (O(nodes / word) in C), made
  once per mask and per growth of the set, not once per gang.

Reservations kept from cycle to cycle are the same ``frozenset`` objects, so their
indices and bits are kept in a ``BlockCache`` that outlives the cycle (the scheduler
keeps one); a reservation's share is then added in C (set union, integer OR) instead of
name by name. Within a cycle the set only grows and node indices do not move (the cycle
runs without yielding); if a node change happens all the same (``node_version``), the
cache is dropped and everything is rebuilt from the names.
"""

from __future__ import annotations

from collections.abc import Iterable, Iterator, Mapping
from collections.abc import Set as AbstractSet

from .cluster_state import ClusterState

_SMALL = 16
"""Domains of at most this many nodes are answered directly, not cached (a one-node
target is a new tuple every time)."""


def _bits_of(indices: Iterable[int], n: int) -> int:
    """One byte per node, 1 where blocked, as a little-endian integer."""
    row = bytearray(n)
    for i in indices:
        row[i] = 1
    return int.from_bytes(row, "little")


def _per_domain(snapshot: ClusterState, indices: Iterable[int]) -> dict[int, int]:
    """id(domain) -> how many of ``indices`` it holds (domains live as long as the
    snapshot's node set, and every cache here is dropped when that changes)."""
    counts: dict[int, int] = {}
    for i in indices:
        for dom in snapshot.ancestors(i):
            key = id(dom)
            counts[key] = counts.get(key, 0) + 1
    return counts


class BlockCache:
    """Indices and bits per reservation (``frozenset`` of names), across cycles."""

    def __init__(self, snapshot: ClusterState) -> None:
        self.snapshot = snapshot
        self._version = snapshot.node_version
        # id(names) -> (names, indices, bits, blocked nodes per id(domain)); the entry
        # holds ``names``, so ids stay unique
        self._entries: dict[int, tuple[frozenset[str], frozenset[int], int, dict[int, int]]] = {}
        self._used: set[int] = set()
        # id(domain nodes tuple) -> (tuple, names)
        self._domains: dict[int, tuple[tuple[int, ...], frozenset[str]]] = {}

    def get(self, names: frozenset[str]) -> tuple[frozenset[int], int, dict[int, int]]:
        """(indices, bits, nodes per id(domain)) of ``names`` (names the snapshot does
        not know are skipped)."""
        snap = self.snapshot
        if snap.node_version != self._version:
            self._version = snap.node_version
            self._entries = {}
            self._domains = {}
        key = id(names)
        self._used.add(key)
        entry = self._entries.get(key)
        if entry is None or entry[0] is not names:
            idx = frozenset(snap.indices(names))
            entry = (names, idx, _bits_of(idx, len(snap.columns.nodes)), _per_domain(snap, idx))
            self._entries[key] = entry
        return entry[1], entry[2], entry[3]

    def names(self, nodes: tuple[int, ...]) -> frozenset[str]:
        """Names of a domain's ``nodes`` tuple (a live domain's: one entry per
        domain), kept until the next node change."""
        snap = self.snapshot
        if snap.node_version != self._version:
            self._version = snap.node_version
            self._entries = {}
            self._domains = {}
        entry = self._domains.get(id(nodes))
        if entry is None or entry[0] is not nodes:
            names = snap.columns.nodes
            entry = (nodes, frozenset(names[i].name for i in nodes))
            self._domains[id(nodes)] = entry
        return entry[1]

    def end_cycle(self) -> None:
        """Forget the reservations not asked for since the last call."""
        self._entries = {k: e for k, e in self._entries.items() if k in self._used}
        self._used = set()


class BlockedNodes(AbstractSet[str]):
    """A growing set of node names with their snapshot indices (see the module doc)."""

    def __init__(
        self,
        snapshot: ClusterState,
        names: Iterable[str] = (),
        cache: BlockCache | None = None,
    ) -> None:
        self.snapshot = snapshot
        self._cache = cache if cache is not None and cache.snapshot is snapshot else None
        self._names: set[str] = set()
        self._indices: set[int] = set()
        self._per_domain: dict[int, int] = {}  # id(domain) -> blocked nodes in it
        self._bits = 0
        self._grown = 0  # counts the updates that blocked something new
        self._version = snapshot.node_version
        # id(mask) -> (mask, _grown when it was made, masked copy)
        self._masked: dict[int, tuple[bytes | bytearray, int, bytes]] = {}
        self.update(names)

    def __contains__(self, name: object) -> bool:
        return name in self._names

    def __iter__(self) -> Iterator[str]:
        return iter(self._names)

    def __len__(self) -> int:
        return len(self._names)

    def isdisjoint(self, other: Iterable[object]) -> bool:
        """In C, over the smaller of the two when ``other`` is a set."""
        return self._names.isdisjoint(other)

    @property
    def per_domain(self) -> Mapping[int, int]:
        """id(live domain) -> how many of its nodes are blocked (absent: none); kept
        per domain as the set grows, so a lookup is O(1). Read-only."""
        self._sync()
        return self._per_domain

    def names_outside(self, nodes: tuple[int, ...]) -> frozenset[str]:
        """Names of a domain's ``nodes`` (indices) that are not blocked."""
        if self._cache is not None and len(nodes) > _SMALL:
            return self._cache.names(nodes) - self._names
        names = self.snapshot.columns.nodes
        return frozenset(n for n in (names[i].name for i in nodes) if n not in self._names)

    def update(self, names: Iterable[str]) -> None:
        """Block ``names`` too (names the snapshot does not know are kept as names only).
        A ``frozenset`` disjoint from the set so far (a reservation) goes through the
        cache: O(len(names)) in C."""
        self._sync()
        if (
            self._cache is not None
            and isinstance(names, frozenset)
            and self._names.isdisjoint(names)
        ):
            idx, bits, counts = self._cache.get(names)
            self._names |= names
            self._indices |= idx
            self._bits |= bits
            per = self._per_domain
            for key, n in counts.items():
                per[key] = per.get(key, 0) + n
            self._grown += 1
            return
        index = self.snapshot.node_index_map
        new = [n for n in names if n not in self._names]
        self._names.update(new)
        added = [index[n] for n in new if n in index]
        self._indices.update(added)
        for key, n in _per_domain(self.snapshot, added).items():
            self._per_domain[key] = self._per_domain.get(key, 0) + n
        if added:
            self._bits |= _bits_of(added, len(self.snapshot.columns.nodes))
            self._grown += 1

    def _sync(self) -> None:
        """Rebuild the indices if the snapshot's nodes changed since they were taken."""
        snap = self.snapshot
        if snap.node_version != self._version:
            self._version = snap.node_version
            self._indices = set(snap.indices(self._names))
            self._per_domain = _per_domain(snap, self._indices)
            self._bits = _bits_of(self._indices, len(snap.columns.nodes))
            self._grown += 1

    def covers_all(self) -> bool:
        """Every node of the snapshot is blocked (O(1))."""
        return len(self.indices) >= len(self.snapshot.columns.nodes)

    @property
    def indices(self) -> AbstractSet[int]:
        """Indices of the blocked nodes (read-only)."""
        self._sync()
        return self._indices

    def masked(self, mask: bytes | bytearray) -> bytes | bytearray:
        """``mask`` (one byte per node, 0 or 1) with every blocked node set to 0: ``mask``
        itself if none is blocked, else a copy, remade only when the set has grown."""
        self._sync()
        bits = self._bits
        if not bits:
            return mask
        entry = self._masked.get(id(mask))
        if entry is not None and entry[0] is mask and entry[1] == self._grown:
            return entry[2]
        # Bytes are 0 or 1, so a bitwise AND never carries between them.
        copy = (int.from_bytes(mask, "little") & ~bits).to_bytes(len(mask), "little")
        self._masked[id(mask)] = (mask, self._grown, copy)
        return copy
