"""Fairness figures of a simulation's queues, per cohort of two or more queues (with fair
sharing on, or weights set).

The scheduler's fair sharing divides what its cohort lends among the queues that ask for
it: a queue with no work is not owed anything, so an idle lender does not dilute the
others' shares. The figures therefore count only the queues that have demand:

* **contended**: an interval in which two or more queues of the cohort have work waiting
  (they compete for the same GPUs);
* ``entitlement``: its ``fairSharing.weight`` over the weights of the queues of its
  cohort that had work waiting, averaged over the intervals it contended in (weighted by
  the GPUs those queues held); None if it never contended;
* ``share_busy``: its share of the GPU-time held by the waiting queues over those same
  intervals; None if it never contended;
* ``contended_s``: how long it contended;
* ``jain_index``: Jain's fairness index of the cohort's ``share_busy / entitlement`` over
  the queues that contended (1: each got exactly its entitlement; 1/n: one got everything);
* ``owed_wait_s``: seconds the queue had work waiting while it held less than its
  weight's share of the cohort's GPUs (the weights of the queues holding or waiting for
  GPUs) and another such queue held more than its own: the time it waited for capacity it
  was owed.
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
        self.weight = {q: weights[q] for q in self.cohort_of}
        self.entitlement = {q: weights[q] / sum(weights[n] for n in self.groups[c])
                            for q, c in self.cohort_of.items()}
        """Each queue's weight over its whole cohort's: its share when every queue of the
        cohort wants more (what the scheduler's fair report calls its entitlement)."""
        self.busy = dict.fromkeys(self.cohort_of, 0.0)
        """GPU-seconds it held while it contended."""
        self.contested = dict.fromkeys(self.cohort_of, 0.0)
        """GPU-seconds the waiting queues held while it contended."""
        self.entitled = dict.fromkeys(self.cohort_of, 0.0)
        """Its weight's share of those GPU-seconds."""
        self.contended = dict.fromkeys(self.cohort_of, 0.0)
        self.owed = dict.fromkeys(self.cohort_of, 0.0)

    @property
    def active(self) -> bool:
        return bool(self.groups)

    def _share_of_weight(self, names: Collection[str]) -> dict[str, float]:
        total = sum(self.weight[q] for q in names)
        return {q: self.weight[q] / total if total > 0 else 1.0 / len(names) for q in names}

    def advance(self, dt: float, used: Callable[[str], int], waiting: Collection[str]) -> None:
        """``dt`` seconds passed with ``used(queue)`` GPUs held and ``waiting`` queues
        having work queued."""
        for names in self.groups.values():
            held = {q: used(q) for q in names}
            wanting = [q for q in names if q in waiting]
            if len(wanting) > 1:
                fair = self._share_of_weight(wanting)
                total = sum(held[q] for q in wanting)
                for q in wanting:
                    self.contended[q] += dt
                    self.busy[q] += held[q] * dt
                    self.contested[q] += total * dt
                    self.entitled[q] += fair[q] * total * dt
            demand = [q for q in names if q in waiting or held[q] > 0]
            total = sum(held[q] for q in demand)
            if total <= 0 or len(demand) < 2:
                continue
            fair = self._share_of_weight(demand)
            over = any(held[q] / total > fair[q] for q in demand)
            for q in wanting:
                if over and held[q] / total < fair[q]:
                    self.owed[q] += dt

    def figures(self, queue: str) -> dict[str, float | None]:
        cohort = self.cohort_of.get(queue)
        if cohort is None:
            return {}

        def share(q: str) -> float | None:
            return self.busy[q] / self.contested[q] if self.contested[q] > 0 else None

        def entitled(q: str) -> float | None:
            return self.entitled[q] / self.contested[q] if self.contested[q] > 0 else None

        ratios = []
        for q in self.groups[cohort]:
            got, owed = share(q), entitled(q)
            if got is not None and owed:
                ratios.append(got / owed)
        index = jain(ratios)
        mine, due = share(queue), entitled(queue)
        return {
            "weight": self.weight[queue],
            "entitlement": None if due is None else round(due, 4),
            "share_busy": None if mine is None else round(mine, 4),
            "contended_s": round(self.contended[queue], 1),
            "jain_index": None if index is None else round(index, 4),
            "owed_wait_s": round(self.owed[queue], 1),
        }
