"""One worker task per TrainingJob: every decision about a job is made by its worker, one at
a time, from a fresh read. Watches only *poke* a worker; pokes that arrive while it works
are coalesced into one more pass. This is what keeps a burst of 16 failing pods from
becoming 16 restarts.

    poke(key) ──> event set ──> worker: reconcile(key, apply) ──> sleep until next poke,
                                          │                       the wake time it asked
                                          └── error: retry with backoff (1s .. 30s)
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Awaitable, Callable

from trainmaster import polling
from trainmaster.operator._model import Key
from trainmaster.tasks import cancel_all

Reconcile = Callable[[Key, bool], Awaitable[float | None]]
"""(job, apply objects?) -> seconds until the job needs another look, or None."""

log = logging.getLogger(__name__)


class Retry(Exception):
    """Raised by a reconcile that cannot proceed yet (e.g. the spec ConfigMap is missing)."""

    def __init__(self, message: str, delay: float = 10.0) -> None:
        super().__init__(message)
        self.delay = delay


class Gone(Exception):
    """Raised by a reconcile whose TrainingJob no longer exists: its worker ends."""


class _Worker:
    def __init__(
        self, key: Key, reconcile: Reconcile, resync: float, on_gone: Callable[[_Worker], None]
    ) -> None:
        self.key = key
        self._on_gone = on_gone
        self.wake = asyncio.Event()
        self.apply = True  # the first pass after (re)start checks every object
        self._reconcile = reconcile
        self._resync = resync
        self.task = asyncio.create_task(self._run(), name=f"trainingjob {key[0]}/{key[1]}")

    def poke(self, apply: bool) -> None:
        self.apply = self.apply or apply
        self.wake.set()

    async def _run(self) -> None:
        failures = 0
        delay: float | None = 0.0
        while True:
            timeout = self._resync if delay is None else delay
            await polling.wait_event(self.wake, timeout)
            self.wake.clear()
            apply, self.apply = self.apply, False
            try:
                delay = await self._reconcile(self.key, apply)
                failures = 0
            except asyncio.CancelledError:
                raise
            except Gone:
                self._on_gone(self)
                return
            except Retry as exc:
                level = logging.DEBUG if exc.delay == 0 else logging.INFO
                log.log(level, "%s/%s: %s; retrying in %.0fs", *self.key, exc, exc.delay)
                delay, self.apply = exc.delay, True
            except Exception:
                # The boundary of one job's reconcile task: whatever goes wrong for one
                # TrainingJob (an API outage, a bug its spec triggers) is logged with its
                # traceback and retried with backoff, and must not end the task that
                # serves the job nor reach the other jobs' tasks.
                failures += 1
                delay, self.apply = min(30.0, 0.5 * 2**failures), True
                log.exception("%s/%s: reconcile failed; retrying in %.1fs", *self.key, delay)
            if delay is not None:
                delay = max(delay, 0.0)


class Supervisor:
    def __init__(self, reconcile: Reconcile, resync: float = 120.0) -> None:
        self._reconcile = reconcile
        self._resync = resync
        self._workers: dict[Key, _Worker] = {}

    def poke(self, key: Key, apply: bool = False) -> None:
        worker = self._workers.get(key)
        if worker is None:
            worker = _Worker(key, self._reconcile, self._resync, self._gone)
            self._workers[key] = worker
        worker.poke(apply)

    def _gone(self, worker: _Worker) -> None:
        if self._workers.get(worker.key) is worker:
            del self._workers[worker.key]

    def known(self) -> list[Key]:
        return list(self._workers)

    async def forget(self, key: Key) -> None:
        worker = self._workers.pop(key, None)
        if worker is not None:
            await cancel_all([worker.task])

    async def close(self) -> None:
        for key in list(self._workers):
            await self.forget(key)
