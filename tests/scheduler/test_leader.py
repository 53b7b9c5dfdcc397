"""Lease-based election: one leader; a standby takes over only after the lease expires
(as observed on its own clock) or is released."""

from __future__ import annotations

import asyncio
import copy
from typing import Any

from tests.scheduler.apifake import FakeApi
from trainmaster.kubeclient import ApiError
from trainmaster.scheduler.runtime.config import LeaderElection
from trainmaster.scheduler.runtime.leader import LeaderElector, Renewal, lease_path

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


def test_a_standby_takes_a_released_lease_without_waiting_its_retry_period() -> None:
    """The standby watches the Lease: a release wakes it at once, not 2 s later."""
    store = LeaseStore()
    api = FakeApi(store)
    a = LeaderElector(api, CONFIG, "a")  # type: ignore[arg-type]
    b = LeaderElector(api, CONFIG, "b")  # type: ignore[arg-type]

    async def run() -> float:
        await a.acquire()
        standby = asyncio.create_task(b.acquire())
        await asyncio.sleep(0.1)  # b has tried once and now waits on the watch
        assert not standby.done()
        loop = asyncio.get_running_loop()
        released = loop.time()
        await a.release()
        assert store.lease is not None
        api.stream(lease_path("ns")).put_nowait(("MODIFIED", copy.deepcopy(store.lease)))
        await asyncio.wait_for(standby, CONFIG.retry_period)
        return loop.time() - released

    took = asyncio.run(run())
    assert took < CONFIG.retry_period / 2
    assert b.is_leader and store.lease is not None
    assert store.lease["spec"]["holderIdentity"] == "b"


def test_a_standby_takes_an_expired_lease_when_it_expires_not_at_its_next_retry() -> None:
    """After a crash nothing is written: the standby sleeps until the lease it saw
    expires (2 s here), not to the next multiple of its retry period (2.8 s)."""
    config = LeaderElection(lease_name="sched", lease_namespace="ns", lease_duration=2,
                            renew_deadline=1.5, retry_period=1.4)
    store = LeaseStore()
    api = FakeApi(store)
    a = LeaderElector(api, config, "a")  # type: ignore[arg-type]
    b = LeaderElector(api, config, "b")  # type: ignore[arg-type]

    async def run() -> float:
        assert await a.try_acquire_or_renew() is Renewal.HELD  # then a "crashes"
        loop = asyncio.get_running_loop()
        started = loop.time()
        await asyncio.wait_for(b.acquire(), 5)
        return loop.time() - started

    took = asyncio.run(run())
    assert config.lease_duration <= took < 2 * config.retry_period - 0.2
    assert store.lease is not None and store.lease["spec"]["holderIdentity"] == "b"


class _Runtime:
    def __init__(self, order: list[str], bind_seconds: float) -> None:
        self.order = order
        self.bind_seconds = bind_seconds
        self.drains: list[float] = []

    def stop_starting(self) -> None:
        self.order.append("stop starting binds")

    async def idle(self) -> None:
        await asyncio.sleep(self.bind_seconds)
        self.order.append("binds done")

    async def shutdown(self, drain: float = 10.0) -> None:
        self.order.append("shutdown (cancel late binds, flush reports)")
        self.drains.append(drain)


class _Elector:
    def __init__(self, order: list[str]) -> None:
        self.order = order

    async def release(self) -> None:
        self.order.append("release")


def test_a_clean_stop_releases_the_lease_once_binds_end_before_flushing_reports() -> None:
    from trainmaster.scheduler.runtime.service import hand_over

    order: list[str] = []
    asyncio.run(hand_over(_Runtime(order, 0.01), _Elector(order)))
    assert order == ["stop starting binds", "binds done", "release",
                     "shutdown (cancel late binds, flush reports)"]


def test_binds_that_do_not_end_are_cancelled_before_the_lease_is_released() -> None:
    from trainmaster.scheduler.runtime.service import hand_over

    order: list[str] = []
    runtime = _Runtime(order, 5)
    asyncio.run(hand_over(runtime, _Elector(order), drain=0.05))
    assert order == ["stop starting binds", "shutdown (cancel late binds, flush reports)",
                     "release"]
    # Cancelled at once, not after a second drain: the lease is no longer renewed.
    assert runtime.drains == [0.0]


class _SlowStart:
    """A runtime whose cache sync outlasts the lease: what a loaded machine or a large
    cluster does to a replica that won the Lease at once."""

    def __init__(self, sync_seconds: float) -> None:
        self.sync_seconds = sync_seconds
        self.ran = False

    async def start(self) -> None:
        await asyncio.sleep(self.sync_seconds)

    async def catch_up(self) -> None: ...

    async def restore_history(self) -> None: ...

    async def run(self, stop: asyncio.Event) -> None:
        self.ran = True
        await stop.wait()

    def stop_starting(self) -> None: ...

    async def idle(self) -> None: ...

    async def shutdown(self, drain: float = 10.0) -> None: ...

    async def abort(self, timeout: float = 5.0) -> None: ...


def test_the_leader_renews_its_lease_while_its_cache_still_syncs(monkeypatch: Any) -> None:
    """Renewal starts when the lease is won, not when the cache is synced: a sync longer
    than the lease duration must not let a standby take over a working leader (caught by
    `bench failover` at 5,000 nodes on a loaded machine: a 15 s sync, then exit 1)."""
    from trainmaster.scheduler import SchedulerConfig
    from trainmaster.scheduler.runtime import service
    from trainmaster.scheduler.runtime.metrics import SchedulerMetrics

    store = LeaseStore()
    runtime = _SlowStart(sync_seconds=1.5)
    election = LeaderElection(lease_name="sched", lease_namespace="ns", lease_duration=0.6,
                              renew_deadline=0.4, retry_period=0.1)

    class Api(FakeApi):
        async def close(self) -> None: ...

    async def connect(*args: Any, **kwargs: Any) -> FakeApi:
        return Api(store)

    from trainmaster.kubeclient import Kube

    monkeypatch.setattr(Kube, "connect", connect)
    monkeypatch.setattr(service, "SchedulerRuntime", lambda *a, **k: runtime)

    async def scenario() -> tuple[int, list[str]]:
        stop = asyncio.Event()
        config = SchedulerConfig(leader_election=election)
        replica = asyncio.ensure_future(service._run(
            config, service.ServiceOptions(identity="a"), SchedulerMetrics(), stop))
        renewals: list[str] = []
        while not runtime.ran:  # a standby would try for the lease all this while
            await asyncio.sleep(0.05)
            assert store.lease is not None or not renewals
            if store.lease is not None:
                renew = store.lease["spec"]["renewTime"]
                if not renewals or renewals[-1] != renew:
                    renewals.append(renew)
        stop.set()
        return await asyncio.wait_for(replica, 5), renewals

    code, renewals = asyncio.run(scenario())
    assert code == service.EXIT_OK and runtime.ran
    assert len(renewals) >= 5  # renewed every retry period during the 1.5 s sync
    assert store.lease is not None and store.lease["spec"]["holderIdentity"] == ""  # released
