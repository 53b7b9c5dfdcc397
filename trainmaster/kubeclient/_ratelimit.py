"""Client-side request rate limit: a token bucket, like client-go's ``flowcontrol``.

Why: the API server is shared. A scheduler that binds a thousand pods at once must not
starve the kubelets and controllers, so every mutating call waits for a token. ``qps`` is
the sustained rate, ``burst`` how many calls may go at once after a quiet period.
"""

from __future__ import annotations

import asyncio
import time
from collections.abc import Callable


class TokenBucket:
    """``await acquire()`` returns when a token is available; waiters queue in order."""

    def __init__(
        self, qps: float, burst: int, clock: Callable[[], float] = time.monotonic
    ) -> None:
        if qps <= 0 or burst < 1:
            raise ValueError(f"qps must be > 0 and burst >= 1, got {qps}, {burst}")
        self._rate = float(qps)
        self._burst = float(burst)
        self._tokens = float(burst)
        self._clock = clock
        self._last = clock()
        self._lock = asyncio.Lock()

    @property
    def qps(self) -> float:
        return self._rate

    def _refill(self) -> None:
        now = self._clock()
        self._tokens = min(self._burst, self._tokens + (now - self._last) * self._rate)
        self._last = now

    def try_acquire(self) -> bool:
        """Take a token if one is there now (no waiting)."""
        self._refill()
        if self._tokens >= 1.0:
            self._tokens -= 1.0
            return True
        return False

    async def acquire(self) -> None:
        # The common case under the limit: no lock, no await. Never overtake waiters.
        if not self._lock.locked() and self.try_acquire():
            return
        async with self._lock:
            while not self.try_acquire():
                await asyncio.sleep((1.0 - self._tokens) / self._rate)
