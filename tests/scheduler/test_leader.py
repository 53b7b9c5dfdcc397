"""Lease-based election: one leader; a standby takes over only after the lease expires
(as observed on its own clock) or is released."""

from __future__ import annotations

import asyncio
import copy
from typing import Any

from tests.scheduler.apifake import FakeApi
from trainmaster.kubeclient import ApiError
from trainmaster.scheduler.runtime.config import LeaderElection
from trainmaster.scheduler.runtime.leader import LeaderElector, Renewal

CONFIG = LeaderElection(lease_name="sched", lease_namespace="ns", lease_duration=15,
                        renew_deadline=10, retry_period=2)


class LeaseStore:
    """One Lease with optimistic concurrency, like the API server."""

    def __init__(self) -> None:
        self.lease: dict[str, Any] | None = None
        self.rv = 0

    def __call__(self, method: str, path: str, body: Any) -> dict[str, Any]:
        if method == "GET":
            if self.lease is None:
                raise ApiError(404, "not found")
            return copy.deepcopy(self.lease)
        if method == "POST":
            if self.lease is not None:
                raise ApiError(409, "exists")
        elif method == "PUT":
            assert self.lease is not None
            if body["metadata"].get("resourceVersion") != self.lease["metadata"]["resourceVersion"]:
                raise ApiError(409, "conflict")
        self.rv += 1
        self.lease = {**copy.deepcopy(body),
                      "metadata": {**body["metadata"], "resourceVersion": str(self.rv)}}
        return copy.deepcopy(self.lease)


def electors() -> tuple[LeaseStore, list[float], LeaderElector, LeaderElector]:
    store = LeaseStore()
    now = [0.0]
    api = FakeApi(store)
    a = LeaderElector(api, CONFIG, "a", clock=lambda: now[0])  # type: ignore[arg-type]
    b = LeaderElector(api, CONFIG, "b", clock=lambda: now[0])  # type: ignore[arg-type]
    return store, now, a, b


def test_one_leader_then_takeover_after_expiry() -> None:
    store, now, a, b = electors()

    async def run() -> None:
        assert await a.try_acquire_or_renew() is Renewal.HELD
        assert await b.try_acquire_or_renew() is Renewal.OTHER
        now[0] += 5
        assert await a.try_acquire_or_renew() is Renewal.HELD  # renewed: record changes
        assert await b.try_acquire_or_renew() is Renewal.OTHER  # b sees it at t=5
        now[0] += 14
        assert await b.try_acquire_or_renew() is Renewal.OTHER  # unchanged for 14 s
        now[0] += 2  # a has died: the record b saw is 16 s old > 15 s
        assert await b.try_acquire_or_renew() is Renewal.HELD
        assert store.lease is not None
        assert store.lease["spec"]["holderIdentity"] == "b"
        assert store.lease["spec"]["leaseTransitions"] == 1
        assert await a.try_acquire_or_renew() is Renewal.OTHER  # a steps down

    asyncio.run(run())


def test_release_hands_over_at_once() -> None:
    _store, _now, a, b = electors()

    async def run() -> None:
        await a.acquire()
        assert await b.try_acquire_or_renew() is Renewal.OTHER
        await a.release()
        assert await b.try_acquire_or_renew() is Renewal.HELD

    asyncio.run(run())


def test_racing_writers_cannot_both_win() -> None:
    _store, _now, a, b = electors()

    async def run() -> list[Renewal]:
        return list(await asyncio.gather(a.try_acquire_or_renew(), b.try_acquire_or_renew()))

    results = asyncio.run(run())
    assert sorted(r.value for r in results) == ["held", "other"]
