"""Gang queue and the scheduling cycle, with an anti-starvation policy.

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

import time
from collections.abc import Mapping, Sequence
from dataclasses import dataclass

from ..framework.gangs import GangManager
from ..framework.interface import Admission, OrderedAdmission
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
from .queue import GangQueue


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

    def submit(self, gang: Gang) -> None:
        """Queue a gang (or replace it, e.g. when more members arrived)."""
        self.queue.add(gang)
        self.gangs.add(gang)

    def remove(self, key: str) -> None:
        """Drop a gang from the queue (deleted, or done elsewhere)."""
        self.queue.remove(key)
        self.gangs.remove(key)
        self._unschedulable_since.pop(key, None)
        self._reservations.pop(key, None)
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

    def run_cycle(self) -> CycleResult:
        now = self._clock()
        placed: list[Placement] = []
        failed: list[Unschedulable] = []
        blocked = BlockedNodes(self.snapshot, cache=self._block_cache)
        held: list[Reservation] = []
        if self.nominated:
            self._expire_nominations(now)
        nominated = frozenset().union(*self.nominated.values()) if self.nominated else None
        ordered = self.queue.ordered()
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
            self._reservations.pop(gang.key, None)
            return None
        reservation = Reservation(gang.key, target.level, target.domain, target.nodes)
        self._reservations[gang.key] = reservation
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
                code = (Code.UNSCHEDULABLE if isinstance(self.admission, OrderedAdmission)
                        and self.admission.preemptible(gang)
                        else Code.UNSCHEDULABLE_AND_UNRESOLVABLE)
                return Unschedulable(gang.key, refused, code)
        if gang.members:
            for plugin in self.profile.pre_filters:
                status = plugin.pre_filter(gang.members[0])
                if not status.is_success():
                    return Unschedulable(gang.key, status.message, status.code)
        result = self._place(
            self.snapshot,
            gang,
            filters=self.profile.filters,
            scorer=self.profile.scorer,
            blocked=blocked,
        )
        if isinstance(result, Unschedulable):
            return result
        failure = self._reserve_and_permit(result)
        if failure is not None:
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
