"""The cohort tree's quota arithmetic, per resource, as Kueue's hierarchical cohorts.

Nodes are queues (leaves; Kueue's ClusterQueue) and cohorts (inner nodes; a cohort may
name a ``parent`` and hold quota of its own). Per resource ``r``:

* ``subtree(r)``: a queue's nominal quota; a cohort's own nominal quota plus what each
  child lends it (the child's subtree quota minus its guaranteed part);
* ``guaranteed(r)``: the part a node never lends: ``subtree - lendingLimit`` with a
  lending limit, else 0 (everything is lent, to be taken back by reclaim);
* ``usage(r)``: a queue's charged usage; a cohort's is what its children use beyond
  their guaranteed parts (what they take from the cohort);
* ``available(r)``: Kueue's ``available``: the guaranteed part left, plus what the parent
  can give, capped at each level by the node's ``borrowingLimit``. Borrowing thus walks
  up the tree within every level's limits.

Usage is kept incrementally: a change at a queue walks up its path (depth of the tree),
so a question costs O(depth), not O(queues).
"""

from __future__ import annotations

from collections.abc import Iterator, KeysView, Mapping
from dataclasses import dataclass


@dataclass(frozen=True, slots=True)
class ResourceQuota:
    """One resource's quota of a queue or cohort (Kueue's names), in base units
    (devices, millicores, bytes)."""

    nominal: int = 0
    borrowing_limit: int | None = None
    """How much beyond its subtree quota the node may take from its parent; None: no limit."""
    lending_limit: int | None = None
    """How much of its subtree quota the node lends its parent; None: all of it."""


class QuotaNode:
    """A queue or a cohort in the tree."""

    __slots__ = (
        "_guaranteed",
        "_subtree",
        "children",
        "kind",
        "name",
        "parent",
        "quotas",
        "usage",
        "weight",
    )

    def __init__(self, name: str, kind: str, quotas: Mapping[str, ResourceQuota],
                 weight: float = 1.0) -> None:
        self.name = name
        self.kind = kind
        """``queue`` or ``cohort``."""
        self.parent: QuotaNode | None = None
        self.children: list[QuotaNode] = []
        self.quotas = dict(quotas)
        self.weight = weight
        self.usage: dict[str, int] = {}
        self._subtree: dict[str, int] = {}
        self._guaranteed: dict[str, int] = {}

    def __repr__(self) -> str:
        return f"{self.kind}/{self.name}"

    @property
    def label(self) -> str:
        return f"{self.kind} {self.name}"

    def covers(self, resource: str) -> bool:
        """A queue counts a resource only if it has a quota for it (a GPU-only queue
        leaves cpu and memory alone); a cohort counts what any node below it covers."""
        return resource in self._subtree

    def resources(self) -> KeysView[str]:
        """The resources this node counts."""
        return self._subtree.keys()

    def subtree(self, resource: str) -> int:
        return self._subtree.get(resource, 0)

    def guaranteed(self, resource: str) -> int:
        return self._guaranteed.get(resource, 0)

    def path(self) -> Iterator[QuotaNode]:
        """This node, then its ancestors up to the root."""
        node: QuotaNode | None = self
        while node is not None:
            yield node
            node = node.parent

    def root(self) -> QuotaNode:
        node = self
        while node.parent is not None:
            node = node.parent
        return node

    def leaves(self) -> Iterator[QuotaNode]:
        if self.kind == "queue":
            yield self
        for child in self.children:
            yield from child.leaves()

    # --- building ---------------------------------------------------------------------

    def compute(self) -> None:
        """Subtree and guaranteed quotas, bottom-up (once, when the tree is built)."""
        for child in self.children:
            child.compute()
        subtree = {r: q.nominal for r, q in self.quotas.items()}
        for child in self.children:
            for r in child._subtree:
                subtree[r] = subtree.get(r, 0) + child.subtree(r) - child.guaranteed(r)
        self._subtree = subtree
        self._guaranteed = {}
        for r, total in subtree.items():
            limit = self.quotas[r].lending_limit if r in self.quotas else None
            if limit is not None and self.parent is not None:
                self._guaranteed[r] = max(0, total - limit)

    # --- usage ------------------------------------------------------------------------

    def stored_in_parent(self, resource: str, usage: int | None = None) -> int:
        """What this node takes from its parent at ``usage`` (default: its usage now)."""
        used = self.usage.get(resource, 0) if usage is None else usage
        return max(0, used - self.guaranteed(resource))

    def add_usage(self, resource: str, delta: int) -> None:
        """Change this node's usage and carry the change up, through each level's
        guaranteed part."""
        node: QuotaNode | None = self
        while node is not None and delta:
            before = node.stored_in_parent(resource)
            node.usage[resource] = node.usage.get(resource, 0) + delta
            delta = node.stored_in_parent(resource) - before
            node = node.parent

    def deltas_up(self, amounts: Mapping[str, int]) -> dict[int, dict[str, int]]:
        """How adding ``amounts`` (negative: removing) here would change the usage of
        each node on the path, by ``id(node)``; nothing is changed."""
        out: dict[int, dict[str, int]] = {}
        for r, amount in amounts.items():
            if not self.covers(r):
                continue
            delta = amount
            for node in self.path():
                if not delta:
                    break
                out.setdefault(id(node), {})[r] = delta
                used = node.usage.get(r, 0)
                delta = node.stored_in_parent(r, used + delta) - node.stored_in_parent(r, used)
        return out

    # --- questions --------------------------------------------------------------------

    def available(self, resource: str) -> int:
        """Kueue's ``available``: how much more of ``resource`` this node may use now,
        borrowing up the tree within every level's borrowing limit (may be negative
        when lenders took their quota back)."""
        if self.parent is None:
            return self.subtree(resource) - self.usage.get(resource, 0)
        used = self.usage.get(resource, 0)
        guaranteed = self.guaranteed(resource)
        local = max(0, guaranteed - used)
        from_parent = self.parent.available(resource)
        quota = self.quotas.get(resource)
        if quota is not None and quota.borrowing_limit is not None:
            stored = self.subtree(resource) - guaranteed
            used_in_parent = max(0, used - guaranteed)
            from_parent = min(from_parent, stored - used_in_parent + quota.borrowing_limit)
        return local + from_parent


def lowest_common_ancestor(a: QuotaNode, b: QuotaNode) -> QuotaNode | None:
    ancestors = {id(n) for n in a.path()}
    for node in b.path():
        if id(node) in ancestors:
            return node
    return None


def child_towards(ancestor: QuotaNode, node: QuotaNode) -> QuotaNode:
    """The child of ``ancestor`` on the path from ``node`` (``node`` itself if it is
    one)."""
    for step in node.path():
        if step.parent is ancestor:
            return step
    raise ValueError(f"{ancestor!r} is not an ancestor of {node!r}")
