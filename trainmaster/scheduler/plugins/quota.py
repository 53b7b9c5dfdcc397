"""Queue quotas: what each queue holds of every resource, and whether a gang may start.
Over 500 lines: one ledger whose charges, usage over time (and its history across
leaders), borrowing and fair-share questions all read the same quota tree.

Names follow Kueue: a queue (ClusterQueue) has per resource (``nvidia.com/gpu``, ``cpu``,
``memory``, ``rdma/...``) a ``nominal`` quota, a ``borrowing_limit`` and a
``lending_limit``; queues name a ``cohort``, and cohorts may name a ``parent`` cohort and
hold quota of their own (``quota_tree``). A queue lends what it leaves idle; it borrows
beyond its nominal quota up the tree within every level's limits; a gang within its
queue's nominal quota is always admitted (the lender takes its quota back by preemption
when borrowers hold it). A queue without any quota is unlimited and lends nothing; a
resource a queue has no quota for is not counted against it (a GPU-only queue leaves
cpu and memory alone). With ``FairSharing.enable`` borrowing work is admitted, and
borrowers preempted, by dominant resource share (``fair_share``).

The ledger is charged per pod uid (idempotent), so a pod assumed by a cycle and later
seen bound is counted once; released when the pod finishes, is deleted, or its bind
fails. Pure bookkeeping: the runtime feeds it, the queue's cycle asks it.
"""

from __future__ import annotations

import time
from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass

from ..framework.model import CPU, GPU, MEMORY, Gang
from ..state.fair_share import (
    FairSharing,
    decayed,
    dominant_share,
    may_yield,
    meeting_nodes,
    preemption_allowed,
)
from ..state.queue_specs import (
    CohortSpec,
    QueueSpec,
    Units,
    cohort_specs,
    fair_sharing,
    plain_units,
    queue_specs,
)
from ..state.quota_tree import QuotaNode, ResourceQuota, child_towards, lowest_common_ancestor

DEFAULT_QUEUE = "default"

Amounts = Mapping[str, int]
"""Resource -> quantity in base units (devices, millicores, bytes)."""


@dataclass(frozen=True, slots=True)
class QueueUsage:
    """One queue's numbers, for status output and gauges."""

    name: str
    in_use: int
    nominal_quota: int | None
    borrowed: int
    cohort: str | None
    resources: tuple[tuple[str, int, int], ...] = ()  # (other resource, in use, borrowed)


def gang_gpus(gang: Gang) -> int:
    """GPUs the gang asks for: every member (a gang places all its pending members)."""
    return sum(p.requests.get(GPU, 0) for p in gang.members)


def gang_amounts(gang: Gang) -> dict[str, int]:
    """Every resource the gang asks for, summed over its members."""
    out: dict[str, int] = {}
    for pod in gang.members:
        for resource, qty in pod.requests.items():
            if qty:
                out[resource] = out.get(resource, 0) + qty
    return out


def _amounts(need: int | Amounts) -> Amounts:
    return {GPU: need} if isinstance(need, int) else need


def format_amount(resource: str, qty: float) -> str:
    """``qty`` base units of ``resource`` as people read them: 8 GPUs, 3.5 cpu, 64Gi
    memory."""
    if resource == GPU:
        return f"{qty:g} GPUs"
    if resource == CPU:
        return f"{qty / 1000:g} cpu"
    if resource == MEMORY:
        return f"{qty / 2**30:g}Gi memory"
    return f"{qty:g} {resource}"


class QueueLedger:
    def __init__(self, queues: Iterable[QueueSpec] = (), default: str = DEFAULT_QUEUE,
                 cohorts: Iterable[CohortSpec] = (), fair: FairSharing = FairSharing(),
                 clock: Callable[[], float] = time.monotonic) -> None:
        self.queues: dict[str, QueueSpec] = {q.name: q for q in queues}
        self.cohorts: dict[str, CohortSpec] = {c.name: c for c in cohorts}
        self.default = default
        self.fair = fair
        self._clock = clock
        self._charges: dict[str, tuple[str, Amounts]] = {}
        self._used: dict[str, dict[str, int]] = {name: {} for name in self.queues}
        self.nodes: dict[str, QuotaNode] = {}
        """Queue name -> its tree node (only queues with a quota)."""
        self.cohort_nodes: dict[str, QuotaNode] = {}
        self._build()
        self._waiting: dict[str, dict[tuple[tuple[str, int], ...], int]] = {}
        self._average: dict[str, tuple[float, dict[str, float]]] = {}
        """Queue -> (when, its decayed average usage then), with a half-life."""
        self._releases: dict[str, int] = {}
        """Retry scope (``retry_scope``) -> releases in it so far."""

    def _build(self) -> None:
        for spec in self.cohorts.values():
            self.cohort_nodes[spec.name] = QuotaNode(spec.name, "cohort", spec.resources,
                                                     spec.weight)
        for queue in self.queues.values():  # cohorts named by queues only: no quota
            if queue.cohort is not None and queue.cohort not in self.cohort_nodes:
                self.cohort_nodes[queue.cohort] = QuotaNode(queue.cohort, "cohort", {})
        for spec in self.cohorts.values():
            if spec.parent is not None:
                parent = self.cohort_nodes.get(spec.parent)
                if parent is None:
                    parent = self.cohort_nodes[spec.parent] = QuotaNode(
                        spec.parent, "cohort", {})
                _link(self.cohort_nodes[spec.name], parent)
        for queue in self.queues.values():
            if not queue.limited:
                continue
            node = self.nodes[queue.name] = QuotaNode(queue.name, "queue", queue.quotas,
                                                      queue.weight)
            if queue.cohort is not None:
                _link(node, self.cohort_nodes[queue.cohort])
        roots = {id(n.root()): n.root() for n in self.nodes.values()}
        for root in roots.values():
            root.compute()

    @property
    def enabled(self) -> bool:
        return bool(self.queues)

    def resolve(self, name: str | None) -> str:
        return name or self.default

    # --- charges ----------------------------------------------------------------------

    def charge(self, uid: str, queue: str, amounts: int | Amounts) -> None:
        """Charge pod ``uid`` (once) to ``queue``: GPUs, or every resource it requests."""
        need = {r: q for r, q in _amounts(amounts).items() if q > 0}
        if uid in self._charges or not need:
            return
        self._charges[uid] = (queue, need)
        self._change(queue, need, 1)

    def release(self, uid: str) -> None:
        charged = self._charges.pop(uid, None)
        if charged is not None:
            self._change(charged[0], charged[1], -1)

    def retry_scope(self, queue: str) -> str | None:
        """What a refusal of ``queue``'s gang can change with: releases anywhere in its
        cohort tree (its root; the queue alone without a cohort). None when refusals also
        change with time or with the other queues' waiting work (fair sharing, a usage
        half-life): the scheduler then retries such a gang at every cycle."""
        if self.fair.enable or self.fair.usage_half_life:
            return None
        node = self.nodes.get(queue)
        return f"queue/{queue}" if node is None else repr(node.root())

    def releases(self, scope: str) -> int:
        """How many releases ``scope`` (``retry_scope``) has seen: a refused gang is
        retried when this moves."""
        return self._releases.get(scope, 0)

    def _change(self, queue: str, need: Amounts, sign: int) -> None:
        node = self.nodes.get(queue)
        if sign < 0:
            scope = f"queue/{queue}" if node is None else repr(node.root())
            self._releases[scope] = self._releases.get(scope, 0) + 1
        if node is not None and self.fair.usage_half_life:
            self._advance(queue, node)
        used = self._used.setdefault(queue, {})
        for resource, qty in need.items():
            used[resource] = used.get(resource, 0) + sign * qty
            if node is not None and node.covers(resource):
                node.add_usage(resource, sign * qty)

    def charged(self, uid: str) -> tuple[str, int] | None:
        """The queue and GPUs pod ``uid`` is charged for."""
        found = self._charges.get(uid)
        return None if found is None else (found[0], found[1].get(GPU, 0))

    def charged_amounts(self, uid: str) -> tuple[str, Amounts] | None:
        return self._charges.get(uid)

    def used(self, queue: str, resource: str = GPU) -> int:
        return self._used.get(queue, {}).get(resource, 0)

    # --- usage over time ----------------------------------------------------------------

    def _advance(self, queue: str, node: QuotaNode) -> dict[str, float]:
        """The queue's decayed average usage now (and remember it)."""
        half_life = self.fair.usage_half_life
        now = self._clock()
        when, average = self._average.get(queue, (now, {}))
        if half_life:
            average = {r: decayed(average.get(r, 0.0), node.usage.get(r, 0), now - when,
                                  half_life) for r in node.resources()}
        self._average[queue] = (now, average)
        return average

    def history(self) -> dict[str, dict[str, float]]:
        """Every quota queue's decayed average usage now (what a next leader needs to
        order queues as this one does); empty without a half-life."""
        if not self.fair.usage_half_life:
            return {}
        return {name: self._advance(name, node) for name, node in sorted(self.nodes.items())}

    def restore(self, saved: Mapping[str, Mapping[str, float]], age: float) -> list[str]:
        """Take a previous leader's averages, saved ``age`` seconds ago: from then on they
        decay toward the usage this ledger sees now. Queues no longer configured are
        ignored; returns the queues restored."""
        if not self.fair.usage_half_life:
            return []
        then = self._clock() - max(0.0, age)
        restored = []
        for name, average in saved.items():
            if name in self.nodes:
                self._average[name] = (then, {r: float(v) for r, v in average.items()})
                restored.append(name)
        return restored

    def average_usage(self, queue: str) -> dict[str, float]:
        """The queue's usage averaged with the half-life's decay (its usage now without
        one)."""
        node = self.nodes.get(queue)
        if node is None:
            return {r: float(q) for r, q in self._used.get(queue, {}).items()}
        if not self.fair.usage_half_life:
            return {r: float(node.usage.get(r, 0)) for r in node.resources()}
        return self._advance(queue, node)

    # --- questions --------------------------------------------------------------------

    def borrowed(self, queue: str, resource: str = GPU) -> int:
        node = self.nodes.get(queue)
        if node is None or not node.covers(resource):
            return 0
        return max(0, node.usage.get(resource, 0) - node.subtree(resource))

    def borrowing(self, queue: str) -> bool:
        node = self.nodes.get(queue)
        return node is not None and any(
            node.usage.get(r, 0) > node.subtree(r) for r in node.resources())

    def cohort_idle(self, cohort: str, resource: str = GPU) -> int:
        """What of the cohort's subtree quota nobody uses (borrowers included)."""
        node = self.cohort_nodes.get(cohort)
        if node is None:
            return 0
        return max(0, node.subtree(resource) - node.usage.get(resource, 0))

    def quota_refusal(self, queue: str, need: int | Amounts) -> str | None:
        """Why quota alone (limits and idle quota up the tree, not fair-share order)
        keeps a gang needing ``need`` out of ``queue`` now; None if it fits."""
        spec = self.queues.get(queue)
        if spec is None:
            if queue == self.default:
                return None  # no default queue configured: unlimited
            known = ", ".join(sorted(self.queues))
            return f"queue {queue} does not exist (queues: {known})"
        node = self.nodes.get(queue)
        if node is None:
            return None
        for resource, qty in sorted(_amounts(need).items()):
            if qty <= 0 or not node.covers(resource):
                continue
            used, nominal = node.usage.get(resource, 0), node.subtree(resource)
            if used + qty <= nominal:
                continue  # its own quota: taken back from borrowers if need be
            if node.parent is None:
                return _over_quota(queue, resource, used, nominal, qty)
            limit = node.quotas[resource].borrowing_limit
            if limit is not None and used + qty > nominal + limit:
                return (f"{_over_quota(queue, resource, used, nominal, qty)}; "
                        f"borrowing limit {limit} reached")
            available = node.available(resource)
            if qty > available:
                return (f"{_over_quota(queue, resource, used, nominal, qty)}; cohort "
                        f"{node.parent.name} has only "
                        f"{format_amount(resource, max(0, available))} idle"
                        ).replace(" GPUs idle", " idle GPUs")
        return None

    def refusal(self, queue: str, need: int | Amounts) -> str | None:
        """Why a gang needing ``need`` (GPUs, or every resource) may not start in
        ``queue`` now, or None if it may: its quota, then (fair sharing) whether a
        queue further below its share waits for the same capacity."""
        reason = self.quota_refusal(queue, need)
        if reason is not None or not self.fair.enable:
            return reason
        return self.fair_refusal(queue, _amounts(need))

    def fits_without(self, queue: str, need: int | Amounts, uids: Sequence[str]) -> bool:
        """Whether quota admits the gang with pods ``uids`` released (nothing changes)."""
        gone = [(uid, self._charges[uid]) for uid in dict.fromkeys(uids)
                if uid in self._charges]
        for uid, _ in gone:
            self.release(uid)
        try:
            return self.quota_refusal(queue, need) is None
        finally:
            for uid, (owner, amounts) in gone:
                self.charge(uid, owner, amounts)

    def ceiling(self, queue: str, resource: str = GPU) -> int | None:
        """The most of ``resource`` ``queue`` could hold with nothing else running;
        None: no limit."""
        node = self.nodes.get(queue)
        if node is None or not node.covers(resource):
            return None
        return max(node.subtree(resource), node.available(resource) + node.usage.get(resource, 0))

    def short_in_tree(self, queue: str, need: int | Amounts) -> bool:
        """Whether quota refuses the gang only because the tree has no idle quota left
        (within the queue's own borrowing limits): evicting borrowers could let it in."""
        node = self.nodes.get(queue)
        if node is None or node.parent is None:
            return False
        short = False
        for resource, qty in _amounts(need).items():
            if qty <= 0 or not node.covers(resource):
                continue
            used, nominal = node.usage.get(resource, 0), node.subtree(resource)
            if used + qty <= nominal:
                continue
            limit = node.quotas[resource].borrowing_limit
            if limit is not None and used + qty > nominal + limit:
                return False
            if qty > node.available(resource):
                short = True
        return short

    def lender_short(self, queue: str, need: int) -> int:
        """GPUs ``queue`` could reclaim from borrowers: what it needs beyond the cohort's
        idle GPUs, if that stays within its own nominal quota; else 0."""
        node = self.nodes.get(queue)
        if node is None or node.parent is None or not node.covers(GPU):
            return 0
        if node.usage.get(GPU, 0) + need > node.subtree(GPU):
            return 0
        return max(0, need - max(0, node.available(GPU)))

    def within_nominal(self, queue: str, need: int | Amounts) -> bool:
        node = self.nodes.get(queue)
        return node is not None and all(
            node.usage.get(r, 0) + q <= node.subtree(r)
            for r, q in _amounts(need).items() if q > 0 and node.covers(r))

    def reclaimable_from(self, queue: str, need: int | Amounts) -> set[str]:
        """Queues whose gangs a gang needing ``need`` in ``queue`` may evict whatever
        their priority, while ``queue`` stays within its nominal quota with the gang (a
        lender taking its quota back): those of its tree that took, across the cohort
        where their paths meet, what the gang needs (exactly what was lent)."""
        node = self.nodes.get(queue)
        if node is None or node.parent is None or not self.within_nominal(queue, need):
            return set()
        wanted = [r for r, q in _amounts(need).items() if q > 0 and node.covers(r)]
        out = set()
        for other in node.root().leaves():
            if other is node:
                continue
            lca = lowest_common_ancestor(node, other)
            if lca is None:
                continue
            side = child_towards(lca, other)
            if any(other.usage.get(r, 0) > other.subtree(r)
                   and side.usage.get(r, 0) > side.subtree(r) for r in wanted):
                out.add(other.name)
        return out

    # --- fair sharing -------------------------------------------------------------------

    def share(self, queue: str, extra: Amounts | None = None) -> float:
        """The queue's weighted dominant resource share (with ``extra`` added)."""
        node = self.nodes.get(queue)
        if node is None:
            return 0.0
        return dominant_share(node, node.deltas_up(extra) if extra else None)

    def set_waiting(self, entries: Iterable[tuple[str, Amounts]]) -> None:
        """The gangs waiting this cycle (queue, what each needs), for fair-share order."""
        waiting: dict[str, dict[tuple[tuple[str, int], ...], int]] = {}
        for queue, need in entries:
            if queue in self.nodes:
                key = tuple(sorted(need.items()))
                per = waiting.setdefault(queue, {})
                per[key] = per.get(key, 0) + 1
        self._waiting = waiting

    def admitted_waiting(self, queue: str, need: Amounts) -> None:
        per = self._waiting.get(queue)
        key = tuple(sorted(need.items()))
        if per and key in per:
            per[key] -= 1
            if not per[key]:
                del per[key]

    def _order_share(self, node: QuotaNode, side: QuotaNode, need: Amounts) -> float:
        """``side``'s share with ``need`` added at queue ``node``, over decayed usage at
        the queue level with a half-life (admission order only)."""
        deltas = node.deltas_up(need)
        if side is node and self.fair.usage_half_life:
            return dominant_share(node, deltas, self.average_usage(node.name))
        return dominant_share(side, deltas)

    def fair_refusal(self, queue: str, need: Amounts) -> str | None:
        """A borrowing gang waits while a gang of a queue further below its share (where
        the two queues' paths meet) waits for quota it would get."""
        node = self.nodes.get(queue)
        if node is None or node.parent is None or self.within_nominal(queue, need) \
                or not self._may_yield(node, need):
            return None
        for other_name, needs in self._waiting.items():
            other = self.nodes[other_name]
            if other is node or not needs:
                continue
            meet = meeting_nodes(node, other)
            if meet is None:
                continue
            mine = self._order_share(node, meet[0], need)
            for key in needs:
                theirs_need = dict(key)
                if self.quota_refusal(other_name, theirs_need) is not None:
                    continue
                theirs = self._order_share(other, meet[1], theirs_need)
                if theirs < mine:
                    return (f"queue {queue}: fair sharing: {meet[1].label} (share "
                            f"{theirs:.3g}) goes before {meet[0].label} (share "
                            f"{mine:.3g}) for its cohort's idle quota")
        return None

    def _may_yield(self, node: QuotaNode, need: Amounts) -> bool:
        """``may_yield`` over what waits this cycle (``fair_refusal``'s quick no)."""
        half_life = bool(self.fair.usage_half_life)
        return may_yield(node, node.deltas_up(need), self._waiting,
                         self.average_usage(node.name) if half_life else None)

    def fair_victims(self, queue: str, need: Amounts,
                     running: Sequence[tuple[str, str, Amounts]]) -> dict[str, float]:
        """Running gangs ``(key, queue, amounts)`` (cheapest first) that a borrowing gang
        needing ``need`` in ``queue`` may evict by fair sharing, with their side's share
        before (eviction order: the highest first). Per target queue a prefix of its
        gangs, each allowed by a strategy with the ones before it gone, so any subset
        the victim search keeps is allowed too (a share only falls as gangs leave)."""
        node = self.nodes.get(queue)
        if not self.fair.enable or node is None or node.parent is None \
                or self.within_nominal(queue, need):
            return {}
        out: dict[str, float] = {}
        gone: dict[str, dict[str, int]] = {}
        stopped: set[str] = set()
        for key, other_name, amounts in running:
            other = self.nodes.get(other_name)
            if other is None or other is node or other_name in stopped:
                continue
            meet = meeting_nodes(node, other)
            if meet is None:
                continue
            mine = dominant_share(meet[0], node.deltas_up(need))
            removed = gone.setdefault(other_name, {})
            before = dominant_share(meet[1], other.deltas_up({r: -q for r, q in removed.items()}))
            after_removed = {r: removed.get(r, 0) + amounts.get(r, 0)
                             for r in removed.keys() | amounts.keys()}
            after = dominant_share(meet[1],
                                   other.deltas_up({r: -q for r, q in after_removed.items()}))
            if before <= 0 or not preemption_allowed(self.fair.preemption_strategies,
                                                     mine, before, after):
                stopped.add(other_name)
                continue
            gone[other_name] = after_removed
            out[key] = before
        return out

    def charged_beyond_limits(self) -> list[str]:
        """Every way the charges break a limit on any resource (empty when none does):
        a queue above nominal + borrowing limit, or a queue borrowing while the tree
        has less than nothing idle. For property tests and the status check."""
        problems = []
        for name, node in self.nodes.items():
            for resource in node.resources():
                used, nominal = node.usage.get(resource, 0), node.subtree(resource)
                if used <= nominal:
                    continue
                limit = node.quotas[resource].borrowing_limit
                if node.parent is None:
                    problems.append(f"{name} {resource}: {used} > nominal {nominal}")
                elif limit is not None and used > nominal + limit:
                    problems.append(f"{name} {resource}: {used} > {nominal} + {limit}")
        return problems

    def usage(self) -> list[QueueUsage]:
        names = sorted(set(self.queues) | {q for q, n in self._used.items() if any(n.values())})
        return [
            QueueUsage(
                name,
                self.used(name),
                self.queues[name].nominal_quota if name in self.queues else None,
                self.borrowed(name),
                self.queues[name].cohort if name in self.queues else None,
                tuple((r, q, self.borrowed(name, r))
                      for r, q in sorted(self._used.get(name, {}).items()) if r != GPU and q),
            )
            for name in names
        ]


def _over_quota(queue: str, resource: str, used: int, nominal: int, qty: int) -> str:
    if resource == GPU:  # the GPU-only wording operators know
        return f"queue {queue}: {used}/{nominal} GPUs in use, gang needs {qty}"
    return (f"queue {queue}: {format_amount(resource, used)} of "
            f"{format_amount(resource, nominal)} in use, gang needs "
            f"{format_amount(resource, qty)}")


def _link(child: QuotaNode, parent: QuotaNode) -> None:
    child.parent = parent
    parent.children.append(child)


__all__ = [
    "DEFAULT_QUEUE", "CohortSpec", "FairSharing", "QueueLedger", "QueueSpec", "QueueUsage",
    "ResourceQuota", "Units", "cohort_specs", "fair_sharing", "gang_amounts", "gang_gpus",
    "plain_units", "queue_specs",
]
