"""Fairness figures of a simulation's queues, per cohort of two or more queues (with fair
sharing on, or weights set).

* ``entitlement``: a queue's weight-derived fair share of its cohort (its
  ``fairSharing.weight`` over the sum of its cohort's queues' weights);
* ``share_busy``: its share of the GPU-time held by its cohort's queues while every one
  of them had work waiting (the busy period, when fairness is contested);
* ``jain_index``: Jain's fairness index of the cohort's ``share_busy / entitlement``
  (1: each queue got exactly its entitlement; 1/n: one queue got everything);
* ``owed_wait_s``: seconds the queue had work waiting while it held less than its
  entitlement of the cohort's GPUs and another queue of the cohort held more than its
  own: the time it waited for capacity it was owed.
"""

from __future__ import annotations

from collections.abc import Callable, Collection

from ._queues import QueueConfig


def jain(values: Collection[float]) -> float | None:
    """Jain's index (sum x)^2 / (n * sum x^2); None without values or all zero."""
    total, squares = sum(values), sum(v * v for v in values)
    return None if not values or squares == 0 else total * total / (len(values) * squares)


class FairnessMeter:
    def __init__(self, queues: QueueConfig) -> None:
        groups: dict[str, list[str]] = {}
        weights: dict[str, float] = {}
        for spec in queues.queues:
            if spec.cohort is not None:
                groups.setdefault(spec.cohort, []).append(spec.name)
                weights[spec.name] = spec.weight
        # Only with fair sharing on or weights set: other runs' JSON keeps its keys.
        weighted = queues.fair.enable or any(w != 1.0 for w in weights.values())
        self.groups = {c: names for c, names in groups.items()
                       if len(names) > 1 and weighted}
        self.cohort_of = {q: c for c, names in self.groups.items() for q in names}
        self.entitlement = {q: weights[q] / sum(weights[n] for n in self.groups[c])
                            for q, c in self.cohort_of.items()}
        self.busy = dict.fromkeys(self.cohort_of, 0.0)
        self.owed = dict.fromkeys(self.cohort_of, 0.0)

    @property
    def active(self) -> bool:
        return bool(self.groups)

    def advance(self, dt: float, used: Callable[[str], int], waiting: Collection[str]) -> None:
        """``dt`` seconds passed with ``used(queue)`` GPUs held and ``waiting`` queues
        having work queued."""
        for names in self.groups.values():
            held = {q: used(q) for q in names}
            total = sum(held.values())
            if all(q in waiting for q in names):
                for q in names:
                    self.busy[q] += held[q] * dt
            if total <= 0:
                continue
            over = any(held[q] / total > self.entitlement[q] for q in names)
            for q in names:
                if q in waiting and over and held[q] / total < self.entitlement[q]:
                    self.owed[q] += dt

    def figures(self, queue: str) -> dict[str, float | None]:
        cohort = self.cohort_of.get(queue)
        if cohort is None:
            return {}
        names = self.groups[cohort]
        busy_total = sum(self.busy[q] for q in names)
        shares = {q: self.busy[q] / busy_total if busy_total > 0 else None for q in names}
        ratios = [s / self.entitlement[q] for q, s in shares.items() if s is not None]
        index = jain(ratios)
        share = shares[queue]
        return {
            "entitlement": round(self.entitlement[queue], 4),
            "share_busy": None if share is None else round(share, 4),
            "jain_index": None if index is None else round(index, 4),
            "owed_wait_s": round(self.owed[queue], 1),
        }
