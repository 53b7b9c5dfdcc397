"""Leader election through a coordination.k8s.io/v1 Lease, as client-go does it.

Why: two replicas run for availability, but two active schedulers would place pods
into the same free space. One holds the Lease and schedules; the other retries every
``retry_period`` and takes over when the lease has not been renewed for
``lease_duration``.

Clock skew: expiry is judged by *when this replica last saw the lease record change*
(its own monotonic clock), never by comparing ``renewTime`` with local wall time. So a
standby waits at least a full ``lease_duration`` after it first sees a stale lease.
The leader steps down when it could not renew for ``renew_deadline`` (shorter than the
lease duration, so it stops before anyone else may start) or as soon as it sees another
holder. Every write carries the lease's resourceVersion: of two racing candidates,
exactly one update succeeds. Lease calls skip the client-side rate limit: queued behind
a burst of binds at a low ``clientQps`` a renewal could miss its deadline.

Fast hand-over: a standby also *watches* the Lease and tries again as soon as it
changes, instead of waiting out ``retry_period``. A leader that stops cleanly releases
the Lease (empty holder), so the standby takes over within one API round trip of the
release rather than up to 2 s later; the retry period stays client-go's 2 s, so the
steady-state load (one GET per replica every 2 s) does not grow with faster failover.
After a crash nothing is written: the standby sleeps exactly until the lease it
observed expires, then takes it. If the watch fails, the retry period still applies.
"""

from __future__ import annotations

import asyncio
import enum
import logging
import time
from collections.abc import Callable
from typing import Any

from trainmaster import polling
from trainmaster.kubeclient import ApiError, Kube
from trainmaster.tasks import cancel_all

from .config import LeaderElection
from .events import now_rfc3339

log = logging.getLogger("trainmaster.scheduler")


class Renewal(enum.Enum):
    HELD = "held"
    """We hold the lease (acquired or renewed)."""
    OTHER = "other"
    """Another replica holds a live lease."""
    ERROR = "error"
    """The API did not answer usefully; try again."""


def lease_path(namespace: str, name: str = "") -> str:
    base = f"/apis/coordination.k8s.io/v1/namespaces/{namespace}/leases"
    return f"{base}/{name}" if name else base


class LeaderElector:
    def __init__(
        self,
        api: Kube,
        config: LeaderElection,
        identity: str,
        clock: Callable[[], float] = time.monotonic,
    ) -> None:
        self._api = api
        self.config = config
        self.identity = identity
        self._clock = clock
        self._observed: tuple[Any, ...] | None = None
        self._observed_at = 0.0
        self.is_leader = False
        self.holder: str = ""

    @property
    def _path(self) -> str:
        return lease_path(self.config.lease_namespace, self.config.lease_name)

    def _spec(self, acquire_time: str, transitions: int) -> dict[str, Any]:
        return {
            "holderIdentity": self.identity,
            "leaseDurationSeconds": max(1, round(self.config.lease_duration)),
            "acquireTime": acquire_time,
            "renewTime": now_rfc3339(micro=True),
            "leaseTransitions": transitions,
        }

    async def try_acquire_or_renew(self) -> Renewal:
        try:
            lease = await self._api.get(self._path)
        except ApiError as err:
            if err.status != 404:
                log.warning("lease %s: %s", self._path, err)
                return Renewal.ERROR
            return await self._create()
        spec = lease.get("spec") or {}
        holder = spec.get("holderIdentity") or ""
        record = (holder, spec.get("renewTime"), spec.get("acquireTime"),
                  spec.get("leaseTransitions"), spec.get("leaseDurationSeconds"))
        now = self._clock()
        if record != self._observed:
            self._observed, self._observed_at = record, now
        self.holder = holder
        duration = float(spec.get("leaseDurationSeconds") or self.config.lease_duration)
        if holder and holder != self.identity and now < self._observed_at + duration:
            return Renewal.OTHER
        transitions = int(spec.get("leaseTransitions") or 0)
        if holder == self.identity:
            new_spec = self._spec(spec.get("acquireTime") or now_rfc3339(micro=True), transitions)
        else:
            new_spec = self._spec(now_rfc3339(micro=True), transitions + 1)
        body = {
            "apiVersion": "coordination.k8s.io/v1",
            "kind": "Lease",
            "metadata": {**lease.get("metadata", {})},
            "spec": new_spec,
        }
        try:
            await self._api.request("PUT", self._path, body=body, limited=False)
        except ApiError as err:
            if err.status == 409:
                return Renewal.OTHER  # someone else wrote first
            log.warning("lease %s: %s", self._path, err)
            return Renewal.ERROR
        self._observe_own(new_spec)
        return Renewal.HELD

    async def _create(self) -> Renewal:
        spec = self._spec(now_rfc3339(micro=True), 0)
        body = {
            "apiVersion": "coordination.k8s.io/v1",
            "kind": "Lease",
            "metadata": {"name": self.config.lease_name,
                         "namespace": self.config.lease_namespace},
            "spec": spec,
        }
        try:
            await self._api.request("POST", lease_path(self.config.lease_namespace), body=body,
                                    limited=False)
        except ApiError as err:
            if err.status == 409:
                return Renewal.OTHER
            log.warning("creating lease %s: %s", self._path, err)
            return Renewal.ERROR
        self._observe_own(spec)
        return Renewal.HELD

    def _observe_own(self, spec: dict[str, Any]) -> None:
        self.holder = self.identity
        self._observed = (self.identity, spec["renewTime"], spec["acquireTime"],
                          spec["leaseTransitions"], spec["leaseDurationSeconds"])
        self._observed_at = self._clock()

    async def acquire(self) -> None:
        """Return once this replica leads: retry every ``retry_period``, at once when
        the Lease changes, and exactly when the lease we observed expires."""
        announced = False
        changed = asyncio.Event()
        watcher = asyncio.create_task(self._watch_lease(changed), name="watch-lease")
        try:
            while True:
                changed.clear()
                result = await self.try_acquire_or_renew()
                if result is Renewal.HELD:
                    self.is_leader = True
                    log.info("%s: leading (lease %s) at %.3f", self.identity, self._path,
                             time.time())
                    return
                if not announced and self.holder:
                    log.info("%s: standing by; %s leads", self.identity, self.holder)
                    announced = True
                wait = (self._until_retry() if result is Renewal.OTHER
                        else self.config.retry_period)  # an error: never spin
                await polling.wait_event(changed, wait)
        finally:
            await cancel_all([watcher])

    def _until_retry(self) -> float:
        """The retry period, or less if the observed lease expires sooner."""
        if self._observed is None:
            return self.config.retry_period
        duration = float(self._observed[4] or self.config.lease_duration)
        # A hair past expiry, so the retry does not land just before it on our clock.
        expires_in = self._observed_at + duration - self._clock() + 0.01
        return max(0.05, min(self.config.retry_period, expires_in))

    async def _watch_lease(self, changed: asyncio.Event) -> None:
        """Set ``changed`` on every event of our Lease (a release, a renewal, a new
        holder). Errors only log: ``acquire`` still retries on its period."""
        params = {"fieldSelector": f"metadata.name={self.config.lease_name}"}
        backoff = 0.2
        while True:
            try:
                async for _kind, _obj in self._api.watch(
                        lease_path(self.config.lease_namespace), params, 60):
                    changed.set()
                backoff = 0.2
            except ApiError as err:
                log.debug("%s: watching lease %s: %s", self.identity, self._path, err)
                await asyncio.sleep(backoff)
                backoff = min(backoff * 2, self.config.retry_period)

    async def hold(self) -> None:
        """Renew every ``retry_period``; return when leadership is lost."""
        last = self._clock()
        while True:
            await asyncio.sleep(self.config.retry_period)
            left = self.config.renew_deadline - (self._clock() - last)
            try:
                async with asyncio.timeout(max(left, 0.05)):
                    result = await self.try_acquire_or_renew()
            except TimeoutError:
                log.warning("%s: renewing the lease timed out (%.1fs left)", self.identity, left)
                result = Renewal.ERROR
            if result is Renewal.HELD:
                last = self._clock()
                continue
            log.debug("%s: lease renewal: %s", self.identity, result.value)
            if result is Renewal.OTHER or self._clock() - last >= self.config.renew_deadline:
                self.is_leader = False
                log.error("%s: lost the lease %s (holder now %r)", self.identity, self._path,
                          self.holder)
                return

    async def release(self) -> None:
        """Give the lease up on a clean shutdown so a standby need not wait it out."""
        if not self.is_leader:
            return
        self.is_leader = False
        try:
            lease = await self._api.get(self._path)
            spec = lease.get("spec") or {}
            if spec.get("holderIdentity") != self.identity:
                return
            spec = {**spec, "holderIdentity": "", "leaseDurationSeconds": 1,
                    "renewTime": now_rfc3339(micro=True)}
            await self._api.request("PUT", self._path, body={**lease, "spec": spec},
                                    limited=False)
        except ApiError as err:
            log.warning("releasing lease %s: %s", self._path, err)
