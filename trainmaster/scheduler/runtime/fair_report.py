"""The queues' fair-sharing figures as the scheduler computes them, for people to read.

``fair_report(ledger)`` reads a ``QueueLedger`` (the scheduler's own, or one built with
``charged_ledger`` from a published usage) and reports every queue and cohort of the
tree:

* ``share``: the weighted dominant resource share, ``QueueLedger.share`` for a queue and
  ``dominant_share`` for a cohort: the very numbers admission and preemption compare
  (0 while within its quota on every resource);
* ``entitlement``: its weight-derived fair share of its parent cohort: its
  ``fairSharing.weight`` over the sum of the weights of the cohort's children (queues and
  cohorts). For a flat cohort of queues this is the simulator's ``entitlement``;
  ``entitled`` is that fraction of the cohort's pool, per resource;
* ``held``: what it holds of its parent's usage of its dominant resource (GPUs when it
  counts them), to read against ``entitlement``;
* per resource: ``used`` against ``nominal`` (its subtree quota), ``borrowed`` (beyond
  it) and ``lent`` (what others use of its lendable quota). The tree does not record who
  lent to whom, so a cohort's borrowing is attributed to its idle lenders (its own quota
  and its children's idle lendable quota) pro rata.

Pure: ``trainmaster status``, the web view and the PR plan all call this one function.
"""

from __future__ import annotations

import math
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

from ..framework.model import GPU
from ..plugins.quota import CohortSpec, FairSharing, QueueLedger, QueueSpec
from ..state.fair_share import dominant_share
from ..state.quota_tree import QuotaNode


@dataclass(frozen=True, slots=True)
class ResourceFigures:
    """One resource of a queue or cohort, in base units (devices, millicores, bytes)."""

    name: str
    used: int
    nominal: int
    """Its subtree quota: a queue's nominal quota; a cohort's own plus what its children
    lend it."""
    borrowed: int
    lent: int
    borrowing_limit: int | None = None
    lending_limit: int | None = None


@dataclass(frozen=True, slots=True)
class NodeFairness:
    """A queue or a cohort of the tree."""

    name: str
    kind: str
    """``queue`` or ``cohort``."""
    parent: str | None
    weight: float
    share: float
    """Weighted dominant resource share (``math.inf``: borrowing at weight 0)."""
    entitlement: float | None
    """Weight over the sum of its parent's children's weights; None without a parent."""
    held: float | None
    """Its part of its parent's usage of ``dominant`` (None: nothing in use there)."""
    dominant: str | None
    """The resource ``held`` is about: GPUs when counted, else its largest share."""
    entitled: dict[str, float] = field(default_factory=dict)
    """``entitlement`` of its parent's pool, per resource."""
    resources: tuple[ResourceFigures, ...] = ()
    children: tuple[str, ...] = ()
    depth: int = 0

    def to_json(self) -> dict[str, Any]:
        return {
            "name": self.name, "kind": self.kind, "parent": self.parent,
            "weight": float(self.weight),
            "share": None if math.isinf(self.share) else round(self.share, 6),
            "share_infinite": math.isinf(self.share),
            "entitlement": None if self.entitlement is None else round(self.entitlement, 6),
            "held": None if self.held is None else round(self.held, 6),
            "dominant": self.dominant,
            "entitled": {r: round(q, 3) for r, q in self.entitled.items()},
            "resources": [
                {"name": r.name, "used": r.used, "nominal": r.nominal,
                 "borrowed": r.borrowed, "lent": r.lent,
                 "borrowing_limit": r.borrowing_limit, "lending_limit": r.lending_limit}
                for r in self.resources],
            "children": list(self.children), "depth": self.depth,
        }


@dataclass(frozen=True, slots=True)
class FairReport:
    """Every node of the queue tree, each cohort followed by its subtree (depth first)."""

    fair_sharing: bool
    nodes: tuple[NodeFairness, ...] = ()

    def queue(self, name: str) -> NodeFairness | None:
        return next((n for n in self.nodes if n.kind == "queue" and n.name == name), None)

    def cohort(self, name: str) -> NodeFairness | None:
        return next((n for n in self.nodes if n.kind == "cohort" and n.name == name), None)

    @property
    def queues(self) -> tuple[NodeFairness, ...]:
        return tuple(n for n in self.nodes if n.kind == "queue")

    @property
    def cohorts(self) -> tuple[NodeFairness, ...]:
        return tuple(n for n in self.nodes if n.kind == "cohort")

    def to_json(self) -> dict[str, Any]:
        return {"fair_sharing": self.fair_sharing,
                "nodes": [n.to_json() for n in self.nodes]}


def charged_ledger(queues: Iterable[QueueSpec], cohorts: Iterable[CohortSpec] = (),
                   fair: FairSharing = FairSharing(),
                   usage: Mapping[str, Mapping[str, int]] | None = None) -> QueueLedger:
    """A ledger of these queues charged with ``usage`` (queue -> resource -> base units),
    e.g. what the scheduler published; no usage: an idle tree (entitlements only)."""
    ledger = QueueLedger(queues, cohorts=cohorts, fair=fair)
    for name, amounts in sorted((usage or {}).items()):
        ledger.charge(f"usage/{name}", name, {r: q for r, q in amounts.items() if q > 0})
    return ledger


def fair_report(ledger: QueueLedger) -> FairReport:
    """The ledger's tree as ``NodeFairness`` rows: roots in name order, each cohort
    followed by its children (cohorts, then queues, by name)."""
    roots = {id(n.root()): n.root() for n in ledger.nodes.values()}
    for node in ledger.cohort_nodes.values():
        roots.setdefault(id(node.root()), node.root())
    out: list[NodeFairness] = []
    lent: dict[int, dict[str, int]] = {}
    for root in sorted(roots.values(), key=lambda n: (n.kind, n.name)):
        _lent(root, {}, lent)
        _walk(ledger, root, 0, lent, out)
    return FairReport(ledger.fair.enable, tuple(out))


def _ordered(children: Sequence[QuotaNode]) -> list[QuotaNode]:
    return sorted(children, key=lambda c: (c.kind != "cohort", c.name))


def _walk(ledger: QueueLedger, node: QuotaNode, depth: int, lent: dict[int, dict[str, int]],
          out: list[NodeFairness]) -> None:
    out.append(_figures(ledger, node, depth, lent.get(id(node), {})))
    for child in _ordered(node.children):
        _walk(ledger, child, depth + 1, lent, out)


def _figures(ledger: QueueLedger, node: QuotaNode, depth: int,
             lent: Mapping[str, int]) -> NodeFairness:
    parent = node.parent
    share = ledger.share(node.name) if node.kind == "queue" else dominant_share(node)
    entitlement = None
    entitled: dict[str, float] = {}
    if parent is not None:
        total = sum(c.weight for c in parent.children)
        entitlement = node.weight / total if total > 0 else 0.0
        entitled = {r: entitlement * parent.subtree(r) for r in sorted(parent.resources())}
    dominant = _dominant(node)
    held = None
    if parent is not None and dominant is not None:
        pool = sum(c.usage.get(dominant, 0) for c in parent.children)
        held = node.usage.get(dominant, 0) / pool if pool > 0 else None
    resources = []
    for r in sorted(node.resources()):
        quota = node.quotas.get(r)
        used, nominal = node.usage.get(r, 0), node.subtree(r)
        resources.append(ResourceFigures(
            r, used, nominal, max(0, used - nominal) if parent is not None else 0,
            lent.get(r, 0), quota.borrowing_limit if quota else None,
            quota.lending_limit if quota else None))
    return NodeFairness(node.name, node.kind, parent.name if parent else None, node.weight,
                        share, entitlement, held, dominant, entitled, tuple(resources),
                        tuple(c.name for c in _ordered(node.children)), depth)


def _dominant(node: QuotaNode) -> str | None:
    if node.covers(GPU):
        return GPU
    best, name = -1.0, None
    for r in sorted(node.resources()):
        nominal = node.subtree(r)
        ratio = node.usage.get(r, 0) / nominal if nominal > 0 else 0.0
        if ratio > best:
            best, name = ratio, r
    return name


def _lent(cohort: QuotaNode, upward: Mapping[str, int],
          out: dict[int, dict[str, int]]) -> None:
    """What each child of ``cohort`` lends: the children's borrowing inside the cohort,
    plus what the cohort itself lends upward (``upward``), spread over the idle lenders
    (the cohort's own quota and each child's idle lendable quota) pro rata."""
    if cohort.kind != "cohort":
        return
    child_lent: dict[int, dict[str, int]] = {id(c): {} for c in cohort.children}
    for r in cohort.resources():
        idle: dict[int, int] = {}
        demand = upward.get(r, 0)
        for child in cohort.children:
            if not child.covers(r):
                continue
            lendable = child.subtree(r) - child.guaranteed(r)
            stored = child.stored_in_parent(r)
            demand += max(0, stored - lendable)
            idle[id(child)] = max(0, lendable - stored)
        own = cohort.quotas[r].nominal if r in cohort.quotas else 0
        supply = own + sum(idle.values())
        if demand <= 0 or supply <= 0:
            continue
        for key, amount in idle.items():
            if amount:
                child_lent[key][r] = min(amount, demand * amount // supply)
    for child in cohort.children:
        out[id(child)] = {r: q for r, q in child_lent[id(child)].items() if q}
        _lent(child, out[id(child)], out)


__all__ = ["FairReport", "NodeFairness", "ResourceFigures", "charged_ledger", "fair_report"]
