"""Queue quotas: which queue holds how many GPUs, and whether a gang may be admitted.

Names follow Kueue's ClusterQueue: a queue has a ``nominal_quota`` of GPUs; queues that
share a ``cohort`` lend each other what they leave idle, and a queue in a cohort may
borrow up to ``borrowing_limit`` GPUs beyond its nominal quota (``None``: as much as
the cohort has idle). A queue without a nominal quota is unlimited and lends nothing.

The ledger is charged per pod uid (idempotent), so a pod assumed by a cycle and later
seen bound is counted once; released when the pod finishes, is deleted, or its bind
fails. Pure bookkeeping: the runtime feeds it, the queue's cycle asks it.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from dataclasses import dataclass

from ..framework.model import GPU, Gang

DEFAULT_QUEUE = "default"


@dataclass(frozen=True, slots=True)
class QueueSpec:
    name: str
    nominal_quota: int | None = None
    """GPUs the queue may hold at once without borrowing; ``None`` is unlimited."""
    borrowing_limit: int | None = None
    """GPUs beyond ``nominal_quota`` it may borrow from its cohort; ``None`` is no limit."""
    cohort: str | None = None
    """Queues of one cohort lend each other their idle nominal quota."""
    preemption: bool = True
    """False: the queue's gangs never preempt (whatever their PriorityClass says)."""

    @property
    def can_borrow(self) -> bool:
        return self.cohort is not None and self.nominal_quota is not None and (
            self.borrowing_limit is None or self.borrowing_limit > 0
        )


@dataclass(frozen=True, slots=True)
class QueueUsage:
    """One queue's numbers, for status output and gauges."""

    name: str
    in_use: int
    nominal_quota: int | None
    borrowed: int
    cohort: str | None


def gang_gpus(gang: Gang) -> int:
    """GPUs the gang asks for: every member (a gang places all its pending members)."""
    return sum(p.requests.get(GPU, 0) for p in gang.members)


class QueueLedger:
    def __init__(self, queues: Iterable[QueueSpec] = (), default: str = DEFAULT_QUEUE) -> None:
        self.queues: dict[str, QueueSpec] = {q.name: q for q in queues}
        self.default = default
        self._charges: dict[str, tuple[str, int]] = {}
        self._used: dict[str, int] = {name: 0 for name in self.queues}

    @property
    def enabled(self) -> bool:
        return bool(self.queues)

    def resolve(self, name: str | None) -> str:
        return name or self.default

    # --- charges ----------------------------------------------------------------------

    def charge(self, uid: str, queue: str, gpus: int) -> None:
        if uid in self._charges or gpus <= 0:
            return
        self._charges[uid] = (queue, gpus)
        self._used[queue] = self._used.get(queue, 0) + gpus

    def release(self, uid: str) -> None:
        charged = self._charges.pop(uid, None)
        if charged is not None:
            self._used[charged[0]] -= charged[1]

    def charged(self, uid: str) -> tuple[str, int] | None:
        return self._charges.get(uid)

    def used(self, queue: str) -> int:
        return self._used.get(queue, 0)

    # --- questions --------------------------------------------------------------------

    def borrowed(self, queue: str) -> int:
        spec = self.queues.get(queue)
        if spec is None or spec.nominal_quota is None:
            return 0
        return max(0, self.used(queue) - spec.nominal_quota)

    def _cohort(self, cohort: str) -> list[QueueSpec]:
        return [q for q in self.queues.values() if q.cohort == cohort]

    def cohort_idle(self, cohort: str) -> int:
        """GPUs of the cohort's nominal quotas that nobody uses (borrowers included)."""
        members = self._cohort(cohort)
        nominal = sum(q.nominal_quota or 0 for q in members)
        return max(0, nominal - sum(self.used(q.name) for q in members))

    def refusal(self, queue: str, need: int) -> str | None:
        """Why a gang of ``need`` GPUs may not start in ``queue`` now, or None if it may."""
        spec = self.queues.get(queue)
        if spec is None:
            if queue == self.default:
                return None  # no default queue configured: unlimited
            known = ", ".join(sorted(self.queues))
            return f"queue {queue} does not exist (queues: {known})"
        if spec.nominal_quota is None:
            return None
        used = self.used(queue)
        if used + need <= spec.nominal_quota:
            return None
        head = f"queue {queue}: {used}/{spec.nominal_quota} GPUs in use, gang needs {need}"
        if spec.cohort is None:
            return head
        limit = spec.borrowing_limit
        if limit is not None and used + need > spec.nominal_quota + limit:
            return f"{head}; borrowing limit {limit} reached"
        idle = self.cohort_idle(spec.cohort)
        if need > idle:
            return f"{head}; cohort {spec.cohort} has only {idle} idle GPUs"
        return None

    def lender_short(self, queue: str, need: int) -> int:
        """GPUs ``queue`` could reclaim from borrowers: what it needs beyond the cohort's
        idle GPUs, if that stays within its own nominal quota; else 0."""
        spec = self.queues.get(queue)
        if spec is None or spec.nominal_quota is None or spec.cohort is None:
            return 0
        used = self.used(queue)
        if used + need > spec.nominal_quota:
            return 0
        return max(0, need - self.cohort_idle(spec.cohort))

    def reclaimable_from(self, queue: str, need: int) -> set[str]:
        """Queues whose gangs a gang of ``need`` GPUs in ``queue`` may evict whatever
        their priority: those borrowing from its cohort, while ``queue`` stays within
        its nominal quota with the gang (a lender taking its quota back)."""
        spec = self.queues.get(queue)
        if spec is None or spec.cohort is None or spec.nominal_quota is None \
                or self.used(queue) + need > spec.nominal_quota:
            return set()
        return {q.name for q in self.queues.values()
                if q.cohort == spec.cohort and q.name != queue and self.borrowed(q.name) > 0}

    def usage(self) -> list[QueueUsage]:
        names = sorted(set(self.queues) | {q for q, n in self._used.items() if n})
        return [
            QueueUsage(
                name,
                self.used(name),
                self.queues[name].nominal_quota if name in self.queues else None,
                self.borrowed(name),
                self.queues[name].cohort if name in self.queues else None,
            )
            for name in names
        ]


def queue_specs(raw: Iterable[Mapping[str, object]]) -> list[QueueSpec]:
    """Queue entries of the scheduler config (camelCase keys) as ``QueueSpec``."""
    out = []
    for entry in raw:
        def _int(key: str, entry: Mapping[str, object] = entry) -> int | None:
            value = entry.get(key)
            return None if value is None else int(str(value))

        nominal = _int("nominalQuota")
        if nominal is None:
            nominal = _int("gpuQuota")
        cohort = entry.get("cohort")
        out.append(
            QueueSpec(
                name=str(entry["name"]),
                nominal_quota=nominal,
                borrowing_limit=_int("borrowingLimit"),
                cohort=None if cohort is None else str(cohort),
                preemption=bool(entry.get("preemption", True)),
            )
        )
    return out
