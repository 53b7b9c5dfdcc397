"""Fair sharing between borrowers, as Kueue's FairSharing defines it (DRF).

A node's (queue's or cohort's) share is its *dominant resource share* of what it uses
above its subtree quota: for each resource, ``borrowed / lendable`` (``lendable``: the
parent's subtree quota of that resource), the largest of them, divided by the node's
``fairSharing.weight``. A node within its quota on every resource has share 0; weight 0
makes any borrowing infinitely expensive (such a node borrows last and is preempted first).

Two queues are compared where their paths meet: the shares of the two children of their
lowest common cohort, each with the change in question applied (Kueue's tournament, in
pairwise form). Admission of borrowing work goes to the lower share; preemption between
borrowers follows Kueue's strategies:

* ``LessThanOrEqualToFinalShare``: the preemptor's share with its workload is <= the
  target's share after the victim is gone;
* ``LessThanInitialShare``: the preemptor's share with its workload is < the target's
  share before it.

With ``usage_half_life`` (Kueue's Admission Fair Sharing, KAI's usage over time) a queue's
share for *admission order* is taken over its usage averaged with exponential decay
(half-life in seconds) instead of its usage now: a team that ran a lot recently yields.
"""

from __future__ import annotations

import math
from collections.abc import Mapping
from dataclasses import dataclass

from .quota_tree import QuotaNode, child_towards, lowest_common_ancestor

LESS_THAN_OR_EQUAL_TO_FINAL_SHARE = "LessThanOrEqualToFinalShare"
LESS_THAN_INITIAL_SHARE = "LessThanInitialShare"
STRATEGIES = (LESS_THAN_OR_EQUAL_TO_FINAL_SHARE, LESS_THAN_INITIAL_SHARE)
"""Kueue's preemption strategies, in its default order."""

Deltas = Mapping[int, Mapping[str, int]]
"""Usage changes by ``id(node)`` (``QuotaNode.deltas_up``)."""


@dataclass(frozen=True, slots=True)
class FairSharing:
    """The scheduler's ``fairSharing`` (and ``admissionFairSharing``) settings."""

    enable: bool = False
    preemption_strategies: tuple[str, ...] = STRATEGIES
    usage_half_life: float | None = None
    """Seconds; None: admission order uses usage now."""


def dominant_share(node: QuotaNode, deltas: Deltas | None = None,
                   usage: Mapping[str, float] | None = None) -> float:
    """``node``'s weighted dominant resource share, with ``deltas`` applied; ``usage``
    replaces the node's own usage (the decayed average, for admission order)."""
    parent = node.parent
    if parent is None:
        return 0.0
    change = deltas.get(id(node), {}) if deltas else {}
    best = 0.0
    borrowing = False
    for resource in node.resources():
        base = usage.get(resource, 0.0) if usage is not None else node.usage.get(resource, 0)
        borrowed = base + change.get(resource, 0) - node.subtree(resource)
        if borrowed <= 0:
            continue
        borrowing = True
        lendable = parent.subtree(resource)
        if lendable > 0:
            best = max(best, borrowed / lendable)
    if not borrowing:
        return 0.0
    if node.weight <= 0:
        return math.inf
    return best / node.weight


def meeting_nodes(a: QuotaNode, b: QuotaNode) -> tuple[QuotaNode, QuotaNode] | None:
    """The children of the lowest common cohort on the paths of ``a`` and ``b``; None
    when they are in different trees (they never compete)."""
    lca = lowest_common_ancestor(a, b)
    if lca is None or lca is a or lca is b:
        return None
    return child_towards(lca, a), child_towards(lca, b)


def may_yield(node: QuotaNode, deltas: Deltas, waiting: Mapping[str, object],
              average: Mapping[str, float] | None = None) -> bool:
    """Whether a queue with work in ``waiting`` (queue -> its waiting needs, empty: none)
    could go before a gang of queue ``node`` whose
    usage changes are ``deltas``: a necessary condition for the pairwise comparison, in
    O(depth x siblings) instead of O(waiting queues). Walking up ``node``'s path, a
    sibling subtree whose share now is already >= the gang's side's share with the gang
    cannot go before it (a waiting gang only adds usage, and a share only grows with
    usage), so only the other subtrees are looked into. ``average``: ``node``'s decayed
    usage (a half-life): a sibling queue's order share is then its own decayed average,
    which has no such bound, so sibling queues are always looked at."""
    child = node
    while child.parent is not None:
        ancestor = child.parent
        if child is node and average is not None:
            mine = dominant_share(node, deltas, average)
        else:
            mine = dominant_share(child, deltas)
        for side in ancestor.children:
            if side is child:
                continue
            if (average is None or side.kind != "queue") and dominant_share(side) >= mine:
                continue
            if any(waiting.get(leaf.name) for leaf in side.leaves()):
                return True
        child = ancestor
    return False


def preemption_allowed(strategies: tuple[str, ...], preemptor_share: float,
                       target_before: float, target_after: float) -> bool:
    """Whether any of ``strategies`` lets a preemptor at ``preemptor_share`` (with its
    workload) evict a victim whose side goes from ``target_before`` to ``target_after``."""
    for strategy in strategies:
        if strategy == LESS_THAN_OR_EQUAL_TO_FINAL_SHARE and preemptor_share <= target_after:
            return True
        if strategy == LESS_THAN_INITIAL_SHARE and preemptor_share < target_before:
            return True
    return False


def decayed(average: float, usage: float, elapsed: float, half_life: float) -> float:
    """An exponentially decayed average of usage after ``elapsed`` seconds at ``usage``:
    it moves from ``average`` towards ``usage``, halfway every ``half_life``."""
    if elapsed <= 0:
        return average
    return usage + (average - usage) * math.pow(0.5, elapsed / half_life)
