"""The client-side token bucket: bursts up to ``burst``, then ``qps``."""

from __future__ import annotations

import asyncio

from trainmaster.kubeclient import TokenBucket


def test_burst_then_rate() -> None:
    now = [0.0]
    bucket = TokenBucket(qps=10, burst=3, clock=lambda: now[0])
    assert [bucket.try_acquire() for _ in range(4)] == [True, True, True, False]
    now[0] += 0.1  # one token per 0.1 s
    assert bucket.try_acquire() and not bucket.try_acquire()
    now[0] += 10
    assert sum(bucket.try_acquire() for _ in range(10)) == 3  # never more than the burst


def test_acquire_waits_for_a_token() -> None:
    async def run() -> int:
        bucket = TokenBucket(qps=1000, burst=1)
        for _ in range(20):
            await bucket.acquire()
        return 20

    assert asyncio.run(run()) == 20
