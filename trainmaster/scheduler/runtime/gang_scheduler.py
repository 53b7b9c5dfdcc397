"""Gang queue and the scheduling cycle, with an anti-starvation policy.
Over 500 lines: the cycle over every gang and the cycle with the wake-up index
(``retry.py``) keep the same reservation and starvation state, so they share one class.

Order: priority descending, then creation timestamp ascending, then ``namespace/name``.

A cycle walks the queue once. A gang that does not fit is skipped, so smaller gangs
behind it still run (backfill). Backfill alone can starve a large gang forever: small
gangs keep taking whatever frees up. Policy:

* The scheduler remembers, per gang, when (by ``clock``) it first came back
  unschedulable; success, removal or an unresolvable verdict resets it.
* Once a gang has been unschedulable for ``starvation_after`` seconds or more, it is
  *starving*. When a starving gang fails again, it gets a *reservation*: the domain it
  would need (see ``reservation_target``: smallest allowed level, a domain that could
  hold it once running pods finish, the one closest to fitting now). The reservation is
  sticky across cycles while it stays valid, so the domain drains instead of hopping.
* Every gang *behind* the starving one in queue order (lower priority, or equal
  priority and newer) may not place pods on reserved nodes in that cycle. Gangs ahead
  of it (higher priority) are unaffected, and gangs behind it still backfill elsewhere.
* Several starving gangs each reserve a domain disjoint from earlier reservations.
* Gangs rejected as ``UNSCHEDULABLE_AND_UNRESOLVABLE`` never reserve anything.

Binding is not done here: placed pods are left ``Assumed`` in the snapshot; the caller
binds them and calls ``confirm`` (or ``forget`` on failure).
"""

from __future__ import annotations

import heapq
import time
from collections.abc import Mapping, Sequence
from dataclasses import dataclass

from ..framework.gangs import GangManager
from ..framework.interface import Admission, OrderedAdmission, ScopedAdmission
from ..framework.model import Gang
from ..framework.registry import Handle, PluginFactory, Profile
from ..framework.results import Placement, Unschedulable
from ..framework.status import Code, Status
from ..placement.elastic import sizes as elastic_sizes
from ..placement.place import Placer, place_gang
from ..placement.reservation import ReservationTarget, reservation_target
from ..placement.stability import PING_PONG_WINDOW_SECONDS, PreemptionGuard
from ..plugins import DEFAULT_PLUGINS, REGISTRY
from ..state import BlockCache, BlockedNodes, ClusterState, OvercommitError
from .ports import Clock
from .queue import GangQueue, queue_key
from .retry import (
    EVERY_CYCLE,
    NEW,
    PREEMPTION,
    RESERVATION,
    STARVING,
    Order,
    RetryPolicy,
    WakeIndex,
    capacity_terms,
)


@dataclass(frozen=True, slots=True)
class Reservation:
    """Nodes held for a starving gang: gangs behind it may not use them."""

    gang: str
    level: str
    domain: str
    nodes: frozenset[str]


@dataclass(frozen=True, slots=True)
class CycleResult:
    placed: tuple[Placement, ...]
    unschedulable: tuple[Unschedulable, ...]
    reservations: tuple[Reservation, ...]


NOMINATION_TIMEOUT_SECONDS = 300.0
"""How long nodes freed by preemption stay the preemptor's when it does not bind: long
enough for victims' grace periods (30 s by default) and a slow bind, short enough that a
preemptor gone wrong does not hold a domain idle for long."""


class GangScheduler:
    """Runs scheduling cycles over a ``GangQueue`` against a ``ClusterState``."""

    def __init__(
        self,
        snapshot: ClusterState,
        *,
        clock: Clock = time.monotonic,
        starvation_after: float = 300.0,
        plugins: Sequence[str] = DEFAULT_PLUGINS,
        registry: Mapping[str, PluginFactory] = REGISTRY,
        placer: Placer = place_gang,
        admission: Admission | None = None,
        weights: Mapping[str, int] | None = None,
        nomination_timeout: float = NOMINATION_TIMEOUT_SECONDS,
        ping_pong_window: float = PING_PONG_WINDOW_SECONDS,
        retry: RetryPolicy = RetryPolicy(),
    ) -> None:
        self.snapshot = snapshot
        self.admission = admission
        self.nominated: dict[str, frozenset[str]] = {}
        """gang -> nodes freed for it by preemption: no other gang may use them."""
        self.nomination_timeout = nomination_timeout
        """Seconds (by ``clock``) a nomination holds when its gang does not bind."""
        self._nominated_at: dict[str, float] = {}
        self.expired_nominations: set[str] = set()
        """Gangs whose nomination timed out: not restored from ``nominatedNodeName``."""
        self.guard = PreemptionGuard(ping_pong_window)
        """Preemptors shielded from gangs of their priority (no ping-pong)."""
        self._place = placer
        self.queue = GangQueue()
        self.gangs = GangManager(snapshot.placed_members)
        handle = Handle(snapshot, self.gangs)
        self.profile = Profile.build(handle, plugins, registry, weights)
        self._clock = clock
        self._starvation_after = starvation_after
        self._unschedulable_since: dict[str, float] = {}
        self._reservations: dict[str, Reservation] = {}
        # gang -> (its reservation, snapshot.node_version) when all its nodes were
        # usable: node usability changes only with node specs, not with pods.
        self._usable_at: dict[str, tuple[Reservation, int]] = {}
        # Kept reservations' node indices and masks, reused from cycle to cycle.
        self._block_cache = BlockCache(snapshot)
        self.retry = retry
        self.wake = WakeIndex(retry)
        """Who is tried at the next cycle, and why (``retry.py``)."""
        self.preemption_wakes = False
        """A post-filter looks at failures: a gang starting wakes the parked gangs of
        higher priority (they may now preempt it). Set by ``Cycle``."""
        self._why: tuple[str, str | None] = ("", None)  # the last failure's kind, scope
        self._released: list[tuple[Order, frozenset[str]]] = []  # reservations given up
        self._unreserved: dict[str, Order] = {}  # starving gangs without a reservation
        self._holders: dict[int, Order] = {}
        self._holders_of: tuple[int, int] = (-1, -1)
        self._res_changes = 0
        self._nominees: frozenset[str] = frozenset()
        self._cycles = 0  # indexed cycles run: keys memoised answers to one cycle

    def submit(self, gang: Gang) -> None:
        """Queue a gang (or replace it, e.g. when more members arrived)."""
        self.queue.add(gang)
        self.gangs.add(gang)
        self.wake.wake(gang.key, NEW)

    def remove(self, key: str) -> None:
        """Drop a gang from the queue (deleted, or done elsewhere)."""
        gang = self.queue.remove(key)
        self.gangs.remove(key)
        self.wake.forget(key)
        self._unreserved.pop(key, None)
        self._unschedulable_since.pop(key, None)
        self._drop_reservation(key, None if gang is None else queue_key(gang))
        self._usable_at.pop(key, None)
        self.nominated.pop(key, None)
        self._nominated_at.pop(key, None)
        self.expired_nominations.discard(key)

    def now(self) -> float:
        return self._clock()

    def preempted(self, gang: Gang) -> None:
        """``gang`` just preempted (its nodes are in ``nominated``): its nomination
        starts now, and it is shielded from gangs of its priority (``guard``)."""
        now = self._clock()
        self._nominated_at[gang.key] = now
        self.expired_nominations.discard(gang.key)
        self.guard.preempted(gang.key, gang.priority, now)

    def _expire_nominations(self, now: float) -> None:
        """Drop nominations older than ``nomination_timeout``: freed capacity is the
        preemptor's until it binds or this passes (then anyone's)."""
        for key in list(self.nominated):
            since = self._nominated_at.setdefault(key, now)
            if now - since > self.nomination_timeout:
                del self.nominated[key]
                del self._nominated_at[key]
                self.expired_nominations.add(key)
        for key in [k for k in self._nominated_at if k not in self.nominated]:
            del self._nominated_at[key]

    def waiting_since(self, key: str) -> float | None:
        return self._unschedulable_since.get(key)

    def next_wake(self) -> float | None:
        """When a parked gang's backoff or starvation timer, or the next full pass, is
        due (None: nothing queued waits for time)."""
        if not self.retry.index or not len(self.queue):
            return None
        return self.wake.next_timer()

    def run_cycle(self) -> CycleResult:
        if self.retry.index:
            return self._run_indexed()
        return self._run_all()

    def _run_all(self) -> CycleResult:
        """Every queued gang, in order (``RetryPolicy(index=False)``: before the index)."""
        now = self._clock()
        placed: list[Placement] = []
        failed: list[Unschedulable] = []
        blocked = BlockedNodes(self.snapshot, cache=self._block_cache)
        held: list[Reservation] = []
        if self.nominated:
            self._expire_nominations(now)
        nominated = frozenset().union(*self.nominated.values()) if self.nominated else None
        ordered = self.queue.ordered()
        self.wake.stats.tried += len(ordered)
        if isinstance(self.admission, OrderedAdmission):
            self.admission.cycle_start(ordered)
        for gang in ordered:
            if nominated:  # nodes freed by preemption are for their preemptor only
                own = self.nominated.get(gang.key, frozenset())
                # rare (only while preemptors wait), so a fresh set without the cache
                outcome = self._schedule_one(
                    gang, BlockedNodes(self.snapshot, set(blocked) | (nominated - own))
                )
            else:
                outcome = self._schedule_one(gang, blocked)
            if isinstance(outcome, Placement):
                placed.append(outcome)
                self.queue.remove(gang.key)
                if self.nominated.pop(gang.key, None) is not None:
                    nominated = (frozenset().union(*self.nominated.values())
                                 if self.nominated else None)
                self._unschedulable_since.pop(gang.key, None)
                self._reservations.pop(gang.key, None)
                self._usable_at.pop(gang.key, None)
                continue
            failed.append(outcome)
            if outcome.code in (Code.UNSCHEDULABLE_AND_UNRESOLVABLE, Code.WAIT, Code.ERROR):
                self._unschedulable_since.pop(gang.key, None)
                self._reservations.pop(gang.key, None)
                self._usable_at.pop(gang.key, None)
                continue
            if gang.grows:
                continue  # growing is opportunistic: it reserves nothing
            since = self._unschedulable_since.setdefault(gang.key, now)
            if now - since >= self._starvation_after:
                needed = gang.sized(gang.required_members) if gang.elastic else gang
                reservation = self._reserve_domain(needed, blocked)
                if reservation is not None:
                    held.append(reservation)
                    blocked.update(reservation.nodes)
        self._block_cache.end_cycle()
        return CycleResult(tuple(placed), tuple(failed), tuple(held))

    # --- the cycle with the wake-up index (retry.py) -----------------------------------

    def _run_indexed(self) -> CycleResult:
        """The woken gangs and the reservation holders, in queue order; everything else
        would fail again and is not tried (``retry.py``). Same decisions as ``_run_all``."""
        now = self._clock()
        wake = self.wake
        self._cycles += 1
        placed: list[Placement] = []
        failed: list[Unschedulable] = []
        held: list[Reservation] = []
        blocked = BlockedNodes(self.snapshot, cache=self._block_cache)
        if self.nominated:
            self._expire_nominations(now)
        nominees = frozenset(self.nominated)
        if self._nominees - nominees:  # freed nodes went back to everybody
            wake.full_pass(now, self.queue.keys(), PREEMPTION)
        self._nominees = nominees
        nominated = frozenset().union(*self.nominated.values()) if self.nominated else None
        if isinstance(self.admission, OrderedAdmission):
            self.admission.cycle_start(self.queue.ordered())
        releases = (self.admission.releases if isinstance(self.admission, ScopedAdmission)
                    else None)
        holders = self._holder_orders()
        for order, names in self._released:
            self._release_behind(order, names, holders)
        self._released = []
        wake.collect(now, self.snapshot, self.queue.keys(), holders, releases)
        woken = dict(wake.pending)
        wake.pending.clear()
        heap = [(queue_key(g), k) for k in woken if (g := self.queue.get(k)) is not None]
        heap += [(queue_key(g), k) for k in self._reservations
                 if k not in woken and (g := self.queue.get(k)) is not None]
        heapq.heapify(heap)
        seen: set[str] = set()
        tried = 0
        while heap:
            order, key = heapq.heappop(heap)
            if key in seen:
                continue
            seen.add(key)
            gang = self.queue.get(key)
            if gang is None:
                continue
            before = self._reservations.get(key)
            # Woken for capacity that the gangs ahead of it took by now: parked again.
            futile = key in woken and not wake.still_helps(key, self.snapshot,
                                                           blocked.indices, self._cycles)
            if (futile or key not in woken) and before is not None:
                if self._still_valid(key, before, blocked):
                    held.append(before)
                    blocked.update(before.nodes)
                    continue
                wake.stats.wakeups[RESERVATION] += 1
            elif futile:
                continue
            wake.unpark(key)
            tried += 1
            if nominated:
                own = self.nominated.get(gang.key, frozenset())
                outcome = self._schedule_one(
                    gang, BlockedNodes(self.snapshot, set(blocked) | (nominated - own)))
            else:
                outcome = self._schedule_one(gang, blocked)
            if isinstance(outcome, Placement):
                placed.append(outcome)
                self.queue.remove(key)
                if self.nominated.pop(key, None) is not None:
                    nominated = (frozenset().union(*self.nominated.values())
                                 if self.nominated else None)
                    self._nominees = frozenset(self.nominated)
                self._unschedulable_since.pop(key, None)
                self._unreserved.pop(key, None)
                wake.forget(key)
                self._drop_reservation(key, order)
                if self.preemption_wakes:
                    wake.preemptors_of(gang.priority)
            else:
                failed.append(outcome)
                reservation = self._failed(gang, outcome, order, now, blocked)
                if reservation is not None:
                    held.append(reservation)
                    blocked.update(reservation.nodes)
                after = self._reservations.get(key)
                if before is not None and after is not before:
                    self._res_changes += 1
                    self._released.append(
                        (order, before.nodes - (after.nodes if after else frozenset())))
            for r_order, names in self._released:
                self._release_behind(r_order, names, holders)
            self._released = []
            if self.snapshot.has_released():
                wake.released(self.snapshot, self.snapshot.take_released(), holders)
            if wake.pending:
                for item in wake.take_behind(self._order_of, order):
                    woken.setdefault(item[1], "")
                    heapq.heappush(heap, item)
        wake.stats.tried += tried
        wake.stats.skipped += len(self.queue) + len(placed) - tried
        self._block_cache.end_cycle()
        return CycleResult(tuple(placed), tuple(failed), tuple(held))

    def _order_of(self, key: str) -> Order | None:
        gang = self.queue.get(key)
        return None if gang is None else queue_key(gang)

    def _failed(self, gang: Gang, outcome: Unschedulable, order: Order, now: float,
                blocked: BlockedNodes) -> Reservation | None:
        """Park a gang that failed (by why) and, if it starves, renew its reservation
        as ``_run_all`` does."""
        key, wake = gang.key, self.wake
        wake.failed(key, now)
        kind, scope = self._why
        if outcome.code in (Code.UNSCHEDULABLE_AND_UNRESOLVABLE, Code.WAIT, Code.ERROR):
            self._unschedulable_since.pop(key, None)
            self._unreserved.pop(key, None)
            self._reservations.pop(key, None)  # released by the caller (before / after)
            self._usable_at.pop(key, None)
            self._park(gang, outcome, order, kind, scope)
            return None
        self._park(gang, outcome, order, kind, scope)
        if gang.grows:
            return None
        since = self._unschedulable_since.setdefault(key, now)
        if now - since < self._starvation_after:
            wake.timer(key, STARVING, since + self._starvation_after)
            return None
        needed = gang.sized(gang.required_members) if gang.elastic else gang
        reservation = self._reserve_domain(needed, blocked)
        if reservation is None:
            self._unreserved[key] = order
        else:
            self._unreserved.pop(key, None)
        return reservation

    def _park(self, gang: Gang, outcome: Unschedulable, order: Order, kind: str,
              scope: str | None) -> None:
        wake = self.wake
        if kind == "quota" and scope is not None and isinstance(self.admission,
                                                                ScopedAdmission):
            wake.park_quota(gang.key, scope, self.admission.releases(scope))
        elif kind == "capacity" and outcome.code is Code.UNSCHEDULABLE:
            terms = capacity_terms(self.snapshot, gang)
            if terms is not None:
                wake.park_capacity(gang.key, order, terms, gang.priority)
            else:
                wake.wake(gang.key, EVERY_CYCLE)
        elif kind == "capacity" or outcome.code is Code.WAIT:
            wake.park_other(gang.key)  # unresolvable, or too few members: node or gang
        else:
            wake.wake(gang.key, EVERY_CYCLE)

    def _drop_reservation(self, key: str, order: Order | None) -> None:
        dropped = self._reservations.pop(key, None)
        self._usable_at.pop(key, None)
        if dropped is not None:
            self._res_changes += 1
            if order is not None:
                self._released.append((order, dropped.nodes))

    def _release_behind(self, order: Order, names: frozenset[str],
                        holders: Mapping[int, Order]) -> None:
        """A reservation given up: its nodes are capacity for the gangs behind its
        holder, and the starving gangs behind it may find a domain now."""
        snap = self.snapshot
        self.wake.released(snap, snap.indices(n for n in names if n in snap.node_index_map),
                           {}, behind=order)
        for key, o in list(self._unreserved.items()):
            if o > order:
                del self._unreserved[key]
                self.wake.wake(key, RESERVATION)

    def _still_valid(self, key: str, reservation: Reservation, blocked: BlockedNodes) -> bool:
        return (not blocked.covers_all() and blocked.isdisjoint(reservation.nodes)
                and self._all_usable(key, reservation))

    def _holder_orders(self) -> dict[int, Order]:
        """Node index -> the queue order of the gang that reserves it."""
        stamp = (self._res_changes, self.snapshot.node_version)
        if stamp != self._holders_of:
            holders: dict[int, Order] = {}
            for key, res in self._reservations.items():
                gang = self.queue.get(key)
                if gang is None:
                    continue
                order = queue_key(gang)
                for i in self._block_cache.get(res.nodes)[0]:
                    holders[i] = order
            self._holders, self._holders_of = holders, stamp
        return self._holders

    def _reserve_domain(self, gang: Gang, blocked: BlockedNodes) -> Reservation | None:
        previous = self._reservations.get(gang.key)
        if (
            previous is not None
            and not blocked.covers_all()  # else a node of it is blocked or gone: recompute
            and blocked.isdisjoint(previous.nodes)  # O(previous), not O(blocked)
            and self._all_usable(gang.key, previous)
        ):
            return previous
        target: ReservationTarget | None = reservation_target(
            self.snapshot,
            gang,
            filters=self.profile.filters,
            scorer=self.profile.scorer,
            blocked=blocked,
        )
        if target is None or not target.nodes:
            if self._reservations.pop(gang.key, None) is not None:
                self._res_changes += 1
            return None
        reservation = Reservation(gang.key, target.level, target.domain, target.nodes)
        self._reservations[gang.key] = reservation
        self._res_changes += 1
        return reservation

    def _all_usable(self, key: str, reservation: Reservation) -> bool:
        version = self.snapshot.node_version
        checked = self._usable_at.get(key)
        if checked is not None and checked[0] is reservation and checked[1] == version:
            return True
        if all(self._usable(n) for n in reservation.nodes):
            self._usable_at[key] = (reservation, version)
            return True
        return False

    def _usable(self, name: str) -> bool:
        try:
            return not self.snapshot.node(name).unschedulable
        except KeyError:
            return False

    def _schedule_one(self, gang: Gang, blocked: BlockedNodes) -> Placement | Unschedulable:
        if gang.elastic and len(gang.members) >= gang.required_members:
            return self._schedule_elastic(gang, blocked)
        return self._schedule_rigid(gang, blocked)

    def _schedule_elastic(self, gang: Gang, blocked: BlockedNodes) -> Placement | Unschedulable:
        """The largest size that is admitted and fits, from every member down to the
        minimum; else the minimum's answer. Each size is placed as a rigid gang with the
        topology for that size, so quota and topology apply to what is actually placed."""
        for pods in elastic_sizes(self.snapshot, gang):
            if pods == gang.required_members:
                break  # the minimum: answered (and explained) below
            outcome = self._schedule_rigid(gang.sized(pods), blocked)
            if isinstance(outcome, Placement):
                return outcome
        return self._schedule_rigid(gang.sized(gang.required_members), blocked)

    def _schedule_rigid(self, gang: Gang, blocked: BlockedNodes) -> Placement | Unschedulable:
        if self.admission is not None:
            refused = self.admission.refusal(gang)
            if refused is not None:
                self._why = ("quota", self.admission.retry_scope(gang)
                             if isinstance(self.admission, ScopedAdmission) else None)
                code = (Code.UNSCHEDULABLE if isinstance(self.admission, OrderedAdmission)
                        and self.admission.preemptible(gang)
                        else Code.UNSCHEDULABLE_AND_UNRESOLVABLE)
                return Unschedulable(gang.key, refused, code)
        if gang.members:
            for plugin in self.profile.pre_filters:
                status = plugin.pre_filter(gang.members[0])
                if not status.is_success():
                    self._why = ("pre_filter", None)
                    return Unschedulable(gang.key, status.message, status.code)
        result = self._place(
            self.snapshot,
            gang,
            filters=self.profile.filters,
            scorer=self.profile.scorer,
            blocked=blocked,
        )
        if isinstance(result, Unschedulable):
            self._why = ("capacity", None)
            return result
        failure = self._reserve_and_permit(result)
        if failure is not None:
            self._why = ("permit", None)
            return Unschedulable(gang.key, failure.message, failure.code)
        if self.admission is not None:
            self.admission.admitted(gang, result)
        return result

    def _reserve_and_permit(self, placement: Placement) -> Status | None:
        """Assume all pods, run reserve then permit plugins; on any failure undo all."""
        assumed: list[tuple[str, str]] = []
        reserved: list[tuple[int, int]] = []
        failure: Status | None = None
        snap = self.snapshot
        try:
            for binding in placement.bindings:
                snap.assume(binding.pod, binding.node)
                assumed.append((binding.pod.uid, binding.node))
            for b_idx, binding in enumerate(placement.bindings):
                for p_idx, plugin in enumerate(self.profile.reserves):
                    status = plugin.reserve(binding.pod, binding.node)
                    if not status.is_success():
                        raise _Abort(status)
                    reserved.append((b_idx, p_idx))
            for binding in placement.bindings:
                for permit in self.profile.permits:
                    status = permit.permit(binding.pod, binding.node)
                    if not status.is_success():
                        raise _Abort(status)
        except _Abort as abort:
            failure = abort.status
        except OvercommitError as err:
            failure = Status.of(Code.ERROR, "assume", str(err))
        if failure is None:
            return None
        for b_idx, p_idx in reversed(reserved):
            binding = placement.bindings[b_idx]
            self.profile.reserves[p_idx].unreserve(binding.pod, binding.node)
        for uid, _ in reversed(assumed):
            snap.forget(uid)
        return failure


class _Abort(Exception):
    def __init__(self, status: Status) -> None:
        super().__init__(status.message)
        self.status = status
