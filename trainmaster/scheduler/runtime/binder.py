"""Bind a placed gang through the Binding API: concurrently, bounded, all or nothing.

Every member's bind runs at once, limited by one semaphore shared by all gangs
(``bindConcurrency``) and by the client's token bucket (``clientQps``). Each result is
applied to the snapshot as it arrives: ``confirm`` on success, ``forget`` otherwise.

Per pod:

* transient failures (no answer, 408/429/5xx) are retried with backoff while the
  pod's place stays reserved, since almost every bind failure is one;
* 404, or a 409 for a different uid or a pod being deleted: the pod is *gone*;
* 409 "already assigned to node X": if X is our node an earlier try got through
  (its answer was lost), so the pod is *bound*; otherwise it is *taken*;
* anything else (403, 422 from an admission webhook ...) after the retries: *failed*.

The gang stands if at least ``required`` members are bound (its minMember, less what
was already placed). Otherwise it is **undone**: the members this attempt bound are
deleted (UID precondition), so no gang sits on GPUs half-started. A bound pod cannot be
unbound; deleting it is the only undo the API has, and a controller-owned pod (Job,
JobSet, the trainmaster operator's gangs) is recreated by its controller and the gang
is scheduled again whole. A pod without a controller would be lost for good, so it is
left bound and a Warning Event says so; the gang's other members then go back to the
queue and the gang is finished in the same domain (see ``_gangs``).
"""

from __future__ import annotations

import asyncio
import enum
import logging
import re
import time
from collections.abc import Callable
from dataclasses import dataclass

from trainmaster.kubeclient import ApiError, Kube, pod_path

from ..framework.results import Binding, Placement
from ..state import PodState
from .cache import ClusterCache
from .metrics import SchedulerMetrics

log = logging.getLogger("trainmaster.scheduler")

_ASSIGNED = re.compile(r'already assigned to node "([^"]+)"')


class BindResult(enum.StrEnum):
    BOUND = "bound"
    GONE = "gone"
    TAKEN = "taken"
    FAILED = "failed"
    ABANDONED = "abandoned"
    """Never sent: the replica was stopping before any member of the gang was."""


@dataclass(frozen=True, slots=True)
class GangOutcome:
    placement: Placement
    required: int
    """Members that had to end up bound for the gang to stand."""
    results: dict[str, BindResult]
    """uid -> result."""
    errors: dict[str, str]
    undone: tuple[str, ...] = ()
    """uids deleted to undo the gang."""
    kept: tuple[str, ...] = ()
    """uids left bound although the gang was undone (no controller to recreate them)."""

    @property
    def abandoned(self) -> bool:
        """Not one bind was sent: the replica stopped before the gang's turn came."""
        return all(r is BindResult.ABANDONED for r in self.results.values())

    @property
    def bound(self) -> int:
        return sum(1 for r in self.results.values() if r is BindResult.BOUND)

    @property
    def stands(self) -> bool:
        """Enough members are bound (any others went back to the queue)."""
        return self.bound >= self.required


def binding_body(binding: Binding) -> dict[str, object]:
    pod = binding.pod
    return {
        "apiVersion": "v1",
        "kind": "Binding",
        # The uid makes the API refuse to bind a different pod recreated under this name.
        "metadata": {"name": pod.name, "namespace": pod.namespace, "uid": pod.uid},
        "target": {"apiVersion": "v1", "kind": "Node", "name": binding.node},
    }


class _GangStart:
    """Whether any member of one gang's binds has been sent (see ``Binder.stop_starting``)."""

    __slots__ = ("begun",)

    def __init__(self) -> None:
        self.begun = False


class Binder:
    def __init__(
        self,
        api: Kube,
        cache: ClusterCache,
        metrics: SchedulerMetrics,
        *,
        concurrency: int,
        attempts: int,
        retry_delay: float = 0.1,
    ) -> None:
        self._api = api
        self._cache = cache
        self._metrics = metrics
        self._gate = asyncio.Semaphore(concurrency)
        self._attempts = attempts
        self._retry_delay = retry_delay
        self._in_flight = 0
        self.quiet = asyncio.Event()
        """Set while no bind is in flight (reports wait for it, see ``ApiWriter``)."""
        self.quiet.set()
        self._starting = True
        self.first_bound_at: float | None = None
        """Unix time of this process's first successful bind."""

    def stop_starting(self) -> None:
        """A clean stop: send no bind of a gang none of whose binds was sent yet.

        Why: a leader plans a whole burst at once and binds it over seconds (10,000 pods
        at 5,000 nodes: ~40 s). A standby may take over only when no bind is in flight,
        so finishing the burst would hold the Lease that long. Gangs already begun are
        finished (no gang cut in half by a clean stop); the others were only assumed in
        this process, and the next leader places them again from the API's state.
        """
        self._starting = False

    async def bind_gang(
        self, placement: Placement, required: int, controlled: Callable[[str], bool]
    ) -> GangOutcome:
        """Bind every member; undo the gang if fewer than ``required`` end up bound."""
        self._in_flight += 1
        self.quiet.clear()
        try:
            return await self._bind_gang(placement, required, controlled)
        finally:
            self._in_flight -= 1
            if not self._in_flight:
                self.quiet.set()

    async def _bind_gang(
        self, placement: Placement, required: int, controlled: Callable[[str], bool]
    ) -> GangOutcome:
        start, began = _GangStart(), time.monotonic()
        pairs = await asyncio.gather(*(self._bind_applied(b, start)
                                       for b in placement.bindings))
        log.debug("gang %s: binds answered in %.3f s", placement.gang,
                  time.monotonic() - began)
        results = {b.pod.uid: r for b, (r, _) in zip(placement.bindings, pairs, strict=True)}
        errors = {
            b.pod.uid: e for b, (_, e) in zip(placement.bindings, pairs, strict=True) if e
        }
        outcome = GangOutcome(placement, required, results, errors)
        if outcome.bound >= required or outcome.abandoned:
            return outcome
        bound = [b for b in placement.bindings if results[b.pod.uid] is BindResult.BOUND]
        if not bound:
            return outcome
        undo = [b for b in bound if controlled(b.pod.uid)]
        kept = tuple(b.pod.uid for b in bound if not controlled(b.pod.uid))
        log.warning(
            "gang %s: %d of %d required members bound (%s); deleting %d bound members, "
            "keeping %d without a controller",
            placement.gang, outcome.bound, required, "; ".join(sorted(set(errors.values()))),
            len(undo), len(kept),
        )  # fmt: skip
        self._cache.mark_terminating(b.pod.uid for b in undo)
        await asyncio.gather(*(self._delete(b) for b in undo))
        self._metrics.undone.inc(len(undo))
        return GangOutcome(placement, required, results, errors,
                           tuple(b.pod.uid for b in undo), kept)

    async def _bind_applied(self, binding: Binding,
                            start: _GangStart) -> tuple[BindResult, str]:
        result, error = await self.bind_one(binding, start)
        snap = self._cache.snapshot
        uid = binding.pod.uid
        self._metrics.binds.labels(result.value).inc()
        if result is BindResult.BOUND:
            self._metrics.bound_pods.inc()
            if snap.pod_state(uid) is PodState.ASSUMED:
                snap.confirm(uid)
        elif snap.pod_state(uid) is PodState.ASSUMED:
            snap.forget(uid)
            self._cache.note_forgotten(binding.pod)
        return result, error

    async def bind_one(self, binding: Binding,
                       start: _GangStart | None = None) -> tuple[BindResult, str]:
        """One pod, with retries on transient errors; never raises ``ApiError``.
        ``start``: its gang's, shared by the members (``stop_starting``)."""
        start = start or _GangStart()
        pod = binding.pod
        path = pod_path(pod.namespace, pod.name, "binding")
        body = binding_body(binding)
        delay = self._retry_delay
        last = ""
        for attempt in range(self._attempts):
            if attempt:
                self._metrics.binds.labels("retry").inc()
                await asyncio.sleep(delay)
                delay *= 2
            if not (start.begun or self._starting):
                return BindResult.ABANDONED, ""
            try:
                async with self._gate:
                    # Checked again: the stop may have come while this waited its turn.
                    if not (start.begun or self._starting):
                        return BindResult.ABANDONED, ""
                    start.begun = True
                    await self._api.post(path, body)
                self._note_first(binding)
                return BindResult.BOUND, ""
            except ApiError as err:
                last = f"{err.status} {err.reason}"
                if err.status == 404:
                    return BindResult.GONE, last
                if err.status == 409:
                    match = _ASSIGNED.search(err.reason)
                    if match is not None:
                        if match.group(1) == binding.node:
                            return BindResult.BOUND, ""
                        return BindResult.TAKEN, last
                    return BindResult.GONE, last  # uid precondition: another pod now
                if "being deleted" in err.reason:
                    return BindResult.GONE, last
                if not err.transient:
                    return BindResult.FAILED, last
        return BindResult.FAILED, last

    def _note_first(self, binding: Binding) -> None:
        """Log this process's first bind with its Unix time: a new leader's first bind
        is what a failover is measured to (``trainmaster bench failover`` reads it; a
        watch of the pods can lag seconds behind a burst of binds)."""
        if self.first_bound_at is None:
            self.first_bound_at = time.time()
            log.info("first pod bound at %.3f: %s on %s", self.first_bound_at,
                     binding.pod.key, binding.node)

    async def _delete(self, binding: Binding) -> None:
        pod = binding.pod
        body = {"apiVersion": "v1", "kind": "DeleteOptions", "preconditions": {"uid": pod.uid}}
        for attempt in range(self._attempts):
            try:
                await self._api.delete(pod_path(pod.namespace, pod.name), body)
                return
            except ApiError as err:
                if err.status in (404, 409):
                    return  # gone already, or another pod under that name now
                if not err.transient or attempt == self._attempts - 1:
                    log.error("undo of gang %s: deleting %s failed: %s", binding.pod.gang_key,
                              pod.key, err)
                    return
                await asyncio.sleep(self._retry_delay * 2**attempt)
