"""Who is retried: the scheduling cycle's wake-up index (docs/scheduler.md, "Who is
retried").

Why: with thousands of gangs waiting, a cycle that tries every queued gang after every
event costs O(queue) per event, although almost every event (one pod finishing) can help
only a few of them. So each gang that fails is *parked* with why it failed, and an event
wakes only the gangs whose reason it can change:

* ``capacity`` (the placer found no domain): a node that released resources wakes the
  gangs for which one pod fits on that node and whose whole need fits in the node's
  domain at the gang's largest allowed level (node, leaf, spine, cluster). Both are
  necessary for any placement the gang did not have before: nothing else grew. Nodes
  reserved for a starving gang wake only that gang and the gangs ahead of it (the others
  may not use them); a reservation that is dropped or moves is a release for the gangs
  behind its holder.
* ``quota`` (admission refused it): a release anywhere in its queue's cohort tree
  (``ScopedAdmission``). With fair sharing or a usage half-life a refusal also changes
  with time and with other queues' work, so such gangs are not parked.
* ``gang`` (too few members) wakes when the gang is submitted again; ``node`` (it could
  not fit even in an empty cluster) only on a node change or a full pass.

A gang that would fail again is therefore not tried, and the decisions are today's. Any
gap in that argument (a mixed gang packed greedily, a filter the conditions above do not
see) is closed by two safety nets: each parked gang's **backoff** (retried after
``backoff_initial`` seconds, doubling with each consecutive failure up to ``backoff_max``)
and a **full pass** over every queued gang every ``full_pass_every`` seconds and after
any node change. Starving gangs are woken when their starvation timer runs out, so they
reserve at the same cycle as before.
"""

from __future__ import annotations

import heapq
from bisect import bisect_right, insort
from collections import Counter
from collections.abc import Callable, Iterable, Mapping, Sequence
from collections.abc import Set as AbstractSet
from dataclasses import dataclass, field
from typing import cast

from ..framework.model import GPU, Gang, TopologyMode
from ..state import ClusterState

Order = tuple[bool, int, float, str]
"""A gang's queue position (``queue.queue_key``)."""

NEW, CAPACITY, QUOTA, RESERVATION, STARVING, BACKOFF, FULL_PASS, NODE_CHANGE, \
    PREEMPTION, EVERY_CYCLE = ("new", "capacity", "quota", "reservation", "starving",
                               "backoff", "full_pass", "node_change", "preemption",
                               "every_cycle")
REASONS = (NEW, CAPACITY, QUOTA, RESERVATION, STARVING, BACKOFF, FULL_PASS, NODE_CHANGE,
           PREEMPTION, EVERY_CYCLE)
"""Why a gang was tried again (the ``reason`` label of the wake-up counter)."""


@dataclass(frozen=True, slots=True)
class RetryPolicy:
    index: bool = True
    """False: every queued gang at every cycle (the behaviour before the index)."""
    backoff_initial: float = 1.0
    backoff_max: float = 60.0
    full_pass_every: float = 300.0
    """Seconds (by the scheduler's clock) between two passes over every queued gang."""


@dataclass(slots=True)
class RetryStats:
    """Counters since the scheduler started (the runtime exports them as metrics; the
    simulator reports them)."""

    wakeups: Counter[str] = field(default_factory=Counter)
    full_passes: int = 0
    backoffs: int = 0
    """Failures that put a gang into (longer) backoff."""
    tried: int = 0
    """Gangs tried (placement attempted) over all cycles."""
    skipped: int = 0
    """Queued gangs not tried in a cycle (parked, nothing woke them)."""
    rechecked: int = 0
    """Gangs woken for capacity that gangs ahead of them had taken by their turn."""

    def to_json(self) -> dict[str, object]:
        return {"wakeups": {r: self.wakeups.get(r, 0) for r in REASONS},
                "full_passes": self.full_passes, "backoffs": self.backoffs,
                "tried": self.tried, "skipped": self.skipped, "rechecked": self.rechecked}


@dataclass(slots=True)
class _Capacity:
    order: Order
    rank: int
    need: int
    per_pod: int
    priority: int
    pods: int
    """Pods it needs at least (each of ``per_pod`` GPUs or more, on one node)."""


def capacity_terms(snapshot: ClusterState, gang: Gang) -> tuple[int, int, int, int] | None:
    """(largest rank it may use, GPUs it needs in one domain there, fewest GPUs of one
    pod, pods it needs) for the smallest placement ``gang`` may take; None if it needs
    no GPU (then nothing here can tell when it fits: it is not parked for capacity)."""
    members = gang.members
    if not members:
        return None
    required = max(gang.required_members if gang.elastic else len(members), 1)
    gpus = sorted(p.effective_requests.get(GPU, 0) for p in members)
    need = sum(gpus[:required])
    if need <= 0 or gpus[0] <= 0:
        return None
    top = len(snapshot.levels) + 1
    if gang.elastic or gang.topology.mode is not TopologyMode.REQUIRED:
        return top, need, gpus[0], required  # an elastic size may take another topology
    try:
        return snapshot.rank(gang.topology.level), need, gpus[0], required
    except ValueError:
        return None


def _slots(snapshot: ClusterState, nodes: Sequence[int], per_pod: int,
           blocked: AbstractSet[int], stamp: int) -> int:
    """Pods of ``per_pod`` GPUs that ``nodes`` outside ``blocked`` could take: a gang
    needing more pods than this cannot fit there, whatever its GPUs in total. Memoised
    until a pod or node changes (``ClusterState.memo``), per cycle (``stamp``) and size
    of ``blocked`` (it only grows within a cycle)."""
    memo = snapshot.memo()
    key = ("slots", id(nodes), per_pod, stamp, len(blocked))
    found = memo.get(key)
    if found is None:
        free = snapshot.columns.free
        found = memo[key] = sum(free[i].get(GPU, 0) // per_pod for i in nodes
                                if i not in blocked and free[i].get(GPU, 0) >= per_pod)
    return cast(int, found)


class WakeIndex:
    """Parked gangs by reason, and the gangs to try at the next cycle (module doc)."""

    def __init__(self, policy: RetryPolicy) -> None:
        self.policy = policy
        self.stats = RetryStats()
        self.pending: dict[str, str] = {}
        """Gang -> why it is tried at the next cycle."""
        self.woken_by: dict[str, list[int]] = {}
        """Gang woken for capacity -> the nodes that woke it: checked again just before
        it is tried (``still_helps``), since the gangs tried before it in the same cycle
        may have taken that capacity."""
        self._capacity: dict[str, _Capacity] = {}
        # (rank, GPUs per pod) -> sorted (need, order, key)
        self._by_need: dict[tuple[int, int], list[tuple[int, Order, str]]] = {}
        self._by_order: list[tuple[Order, str]] = []  # capacity-parked, queue order
        self._priorities: Counter[int] = Counter()  # of the capacity-parked
        self._quota: dict[str, dict[str, int]] = {}  # scope -> gang -> releases then
        self._quota_of: dict[str, str] = {}
        self._other: set[str] = set()  # parked for gang or node reasons
        self._failures: dict[str, int] = {}
        self._timers: list[tuple[float, int, str, str]] = []
        self._timer_at: dict[tuple[str, str], float] = {}
        self._seq = 0
        self._full_at: float | None = None
        self._node_version: int | None = None

    # --- parking ----------------------------------------------------------------------

    def parked(self, key: str) -> bool:
        return key in self._capacity or key in self._quota_of or key in self._other

    def park_capacity(self, key: str, order: Order, terms: tuple[int, int, int, int],
                      priority: int) -> None:
        self.unpark(key)
        rank, need, per_pod, pods = terms
        self._capacity[key] = _Capacity(order, rank, need, per_pod, priority, pods)
        insort(self._by_need.setdefault((rank, per_pod), []), (need, order, key))
        insort(self._by_order, (order, key))
        self._priorities[priority] += 1

    def park_quota(self, key: str, scope: str, releases: int) -> None:
        self.unpark(key)
        self._quota.setdefault(scope, {})[key] = releases
        self._quota_of[key] = scope

    def park_other(self, key: str) -> None:
        self.unpark(key)
        self._other.add(key)

    def unpark(self, key: str) -> None:
        cap = self._capacity.pop(key, None)
        if cap is not None:
            bucket = self._by_need[(cap.rank, cap.per_pod)]
            entry = (cap.need, cap.order, key)
            i = bisect_right(bucket, entry) - 1
            if i >= 0 and bucket[i] == entry:
                del bucket[i]
            j = bisect_right(self._by_order, (cap.order, key)) - 1
            if j >= 0 and self._by_order[j] == (cap.order, key):
                del self._by_order[j]
            left = self._priorities[cap.priority] - 1
            if left:
                self._priorities[cap.priority] = left
            else:
                del self._priorities[cap.priority]
        scope = self._quota_of.pop(key, None)
        if scope is not None:
            members = self._quota[scope]
            members.pop(key, None)
            if not members:
                del self._quota[scope]
        self._other.discard(key)

    def forget(self, key: str) -> None:
        """The gang left the queue (placed, removed)."""
        self.unpark(key)
        self.pending.pop(key, None)
        self.woken_by.pop(key, None)
        self._failures.pop(key, None)
        self._timer_at.pop((key, BACKOFF), None)
        self._timer_at.pop((key, STARVING), None)

    def wake(self, key: str, reason: str, nodes: Sequence[int] | None = None) -> None:
        """Try ``key`` at the next cycle (or later in this one, see ``take_behind``).
        ``nodes``: the nodes whose release woke it for capacity; such a gang stays in the
        index until it is tried, so that every later release that may help it is noted
        too (``still_helps`` checks them all)."""
        before = self.pending.get(key)
        if nodes is not None and key in self._capacity:
            if before in (None, CAPACITY):
                self.woken_by.setdefault(key, []).extend(nodes)
        else:  # woken for another reason: tried in any case
            self.unpark(key)
            self.woken_by.pop(key, None)
        if before is None or (before == CAPACITY and nodes is None):
            self.pending[key] = reason
            self.stats.wakeups[reason] += 1

    def still_helps(self, key: str, snapshot: ClusterState, blocked: AbstractSet[int],
                    stamp: int = 0) -> bool:
        """Whether a node that woke ``key`` for capacity still holds one of its pods and
        its domain still its whole need, outside ``blocked``; True if it was woken for
        anything else. False: it would fail (the gangs tried before it took that
        capacity), so it stays parked without a try. ``stamp``: the cycle's, for the
        slot counts memoised on the snapshot (``_slots``)."""
        nodes = self.woken_by.pop(key, None)
        cap = self._capacity.get(key)
        if nodes is None or cap is None:
            return True
        cols = snapshot.columns
        seen: set[int] = set()
        for i in nodes:
            if i >= len(cols.free) or i in blocked or i in seen:
                continue
            seen.add(i)
            if cols.free[i].get(GPU, 0) < cap.per_pod:
                continue
            if cap.rank == 0:
                return True
            for dom in snapshot.ancestors(i):
                if dom.rank == cap.rank:
                    if (dom.free.get(GPU, 0) >= cap.need
                            and _slots(snapshot, dom.nodes, cap.per_pod, blocked,
                                       stamp) >= cap.pods):
                        return True
                    break
            else:
                return True
        self.stats.rechecked += 1
        return False

    # --- backoff and timers -----------------------------------------------------------

    def failed(self, key: str, now: float) -> None:
        """``key`` was tried and failed: its backoff grows (capped)."""
        count = self._failures.get(key, 0) + 1
        self._failures[key] = count
        delay = min(self.policy.backoff_initial * 2.0 ** min(count - 1, 60),
                    self.policy.backoff_max)
        self.stats.backoffs += 1
        self.timer(key, BACKOFF, now + delay)

    def timer(self, key: str, kind: str, when: float) -> None:
        if self._timer_at.get((key, kind)) == when:
            return
        self._timer_at[(key, kind)] = when
        self._seq += 1
        heapq.heappush(self._timers, (when, self._seq, key, kind))

    def next_timer(self) -> float | None:
        """When the earliest backoff or starvation timer (or full pass) is due."""
        timers = self._timers
        while timers and self._timer_at.get((timers[0][2], timers[0][3])) != timers[0][0]:
            heapq.heappop(timers)
        due = timers[0][0] if timers else None
        if self._full_at is not None and (due is None or self._full_at < due):
            due = self._full_at
        return due

    # --- what wakes -------------------------------------------------------------------

    def collect(self, now: float, snapshot: ClusterState, queued: Iterable[str],
                holders: Mapping[int, Order], releases: Callable[[str], int] | None) -> None:
        """Everything due at the start of a cycle: a full pass (periodic, or after a node
        change), timers, quota releases, and the nodes released since the last cycle."""
        version = snapshot.node_version
        if self._full_at is None:
            self._full_at = now + self.policy.full_pass_every
        reason = None
        if self._node_version is not None and version != self._node_version:
            reason = NODE_CHANGE
        elif now >= self._full_at:
            reason = FULL_PASS
        self._node_version = version
        if reason is not None:
            snapshot.take_released()
            self.full_pass(now, queued, reason)
            return
        timers = self._timers
        while timers and timers[0][0] <= now:
            when, _, key, kind = heapq.heappop(timers)
            if self._timer_at.get((key, kind)) == when:
                del self._timer_at[(key, kind)]
                if self.parked(key):
                    self.wake(key, kind)
        if releases is not None:
            for scope in list(self._quota):
                current = releases(scope)
                for key, seen in list(self._quota.get(scope, {}).items()):
                    if seen != current:
                        self.wake(key, QUOTA)
        if snapshot.has_released():
            self.released(snapshot, snapshot.take_released(), holders)

    def full_pass(self, now: float, queued: Iterable[str], reason: str = FULL_PASS) -> None:
        self.stats.full_passes += 1
        self._full_at = now + self.policy.full_pass_every
        for key in queued:
            self.wake(key, reason)

    def released(self, snapshot: ClusterState, nodes: Iterable[int],
                 holders: Mapping[int, Order], behind: Order | None = None) -> None:
        """Wake the capacity-parked gangs that ``nodes`` (indices that released
        resources, or left a reservation) may help: a pod fits on the node and the need
        fits in its domain at the gang's rank. A node reserved for a gang (``holders``:
        index -> its holder's order) helps only that gang and those ahead of it;
        ``behind``: only gangs after this order (a reservation its holder gave up)."""
        if not self._capacity:
            return
        cols = snapshot.columns
        top = len(snapshot.levels) + 1
        # (rank, domain) -> [its free GPUs, the released nodes in it with their free
        # GPUs]: a gang is woken once per domain at its rank, not once per node.
        touched: dict[tuple[int, object], tuple[int, list[tuple[int, int]]]] = {}
        for i in nodes:
            if i >= len(cols.free):
                continue
            free_i = cols.free[i].get(GPU, 0)
            if free_i <= 0:
                continue
            limit = holders.get(i)
            if limit is not None or behind is not None:
                at_rank = {0: free_i}
                for dom in snapshot.ancestors(i):
                    at_rank[dom.rank] = dom.free.get(GPU, 0)
                at_rank.setdefault(top, free_i)
                self._wake_limited(i, at_rank, free_i, limit, behind)
                continue
            touched[(0, i)] = (free_i, [(i, free_i)])
            has_top = False
            for dom in snapshot.ancestors(i):
                has_top = has_top or dom.rank == top
                entry = touched.get((dom.rank, id(dom)))
                if entry is None:
                    entry = touched[(dom.rank, id(dom))] = (dom.free.get(GPU, 0), [])
                entry[1].append((i, free_i))
            if not has_top:
                touched[(top, ("node", i))] = (free_i, [(i, free_i)])
        by_rank: dict[int, list[tuple[int, list[tuple[int, int]]]]] = {}
        for (rank, _), entry in touched.items():
            by_rank.setdefault(rank, []).append(entry)
        for (rank, per_pod), bucket in self._by_need.items():
            if not bucket:
                continue
            for free, members in by_rank.get(rank, ()):
                helping = [i for i, f in members if f >= per_pod]
                if not helping:
                    continue
                k = bisect_right(bucket, free, key=lambda e: e[0])
                for _, _, key in bucket[:k]:
                    self.wake(key, CAPACITY, helping)

    def _wake_limited(self, i: int, at_rank: Mapping[int, int], free_i: int,
                      limit: Order | None, behind: Order | None) -> None:
        if limit is not None:
            end = bisect_right(self._by_order, (limit, "\uffff"))
            candidates = self._by_order[:end]
        else:
            candidates = self._by_order
        if behind is not None:
            start = bisect_right(candidates, (behind, "\uffff"))
            candidates = candidates[start:]
        for _, key in candidates:
            cap = self._capacity.get(key)
            if cap is None or cap.per_pod > free_i:
                continue
            free = at_rank.get(cap.rank)
            if free is not None and cap.need <= free:
                self.wake(key, CAPACITY, (i,))

    def preemptors_of(self, priority: int) -> None:
        """A gang of ``priority`` just started: the parked gangs above it may now preempt
        it (only while a post-filter looks at failures)."""
        if not self._priorities or max(self._priorities) <= priority:
            return
        for key, cap in list(self._capacity.items()):
            if cap.priority > priority:
                self.wake(key, PREEMPTION)

    def take_behind(self, order_of: Callable[[str], Order | None], current: Order
                    ) -> list[tuple[Order, str]]:
        """Pending gangs after ``current`` in queue order (tried later in this cycle);
        the others stay pending for the next cycle."""
        out = []
        for key in list(self.pending):
            order = order_of(key)
            if order is None:
                del self.pending[key]
            elif order > current:
                del self.pending[key]
                out.append((order, key))
        return out
