"""Background API writes that only report (Events, pod conditions), off the bind path.

Why a queue with a few workers: reporting must never delay a bind or a scheduling cycle,
and when the API server is slow it is better to drop a report (counted, logged) than to
pile up unbounded work. Writes go through the same rate-limited client as binds.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import os
import socket
from collections.abc import Awaitable, Callable, Mapping
from dataclasses import dataclass
from datetime import UTC, datetime

from trainmaster.kubeclient import ApiError, Kube, pod_path
from trainmaster.tasks import cancel_all

from .._keys import POD_SCHEDULED

log = logging.getLogger("trainmaster.scheduler")

Write = Callable[[], Awaitable[object]]


def now_rfc3339(micro: bool = False) -> str:
    stamp = datetime.now(UTC)
    if micro:
        return stamp.strftime("%Y-%m-%dT%H:%M:%S.%fZ")
    return stamp.strftime("%Y-%m-%dT%H:%M:%SZ")


def default_identity() -> str:
    return f"{socket.gethostname()}_{os.getpid()}"


@dataclass(frozen=True, slots=True)
class ObjectRef:
    kind: str
    namespace: str
    name: str
    uid: str = ""
    api_version: str = "v1"


class ApiWriter:
    """Runs queued writes with ``workers`` tasks; ``submit`` never blocks.

    With ``quiet`` (the binder's "nothing in flight" event) a write waits, up to
    ``max_delay`` seconds, until no bind is in flight: during a burst of binds the API
    server's time goes to the binds, and the Events follow right after. Likewise while a
    ``submit_now`` write (a preemption's evictions) runs: its gang waits for it.
    """

    def __init__(
        self,
        workers: int = 4,
        capacity: int = 10_000,
        quiet: asyncio.Event | None = None,
        max_delay: float = 5.0,
    ) -> None:
        self._queue: asyncio.Queue[Write] = asyncio.Queue(capacity)
        self._quiet = quiet
        self._max_delay = max_delay
        self._workers = workers
        self._tasks: list[asyncio.Task[None]] = []
        self._urgent: set[asyncio.Task[None]] = set()
        self.dropped = 0
        self.failed = 0
        self._running = 0

    def start(self) -> None:
        if not self._tasks:
            self._tasks = [asyncio.create_task(self._work()) for _ in range(self._workers)]

    def backlog(self) -> int:
        """Writes queued or running (the ``report_writes_queued`` gauge)."""
        return self._queue.qsize() + self._running

    def submit(self, write: Write) -> None:
        try:
            self._queue.put_nowait(write)
        except asyncio.QueueFull:
            self.dropped += 1
            if self.dropped % 1000 == 1:
                log.warning("report queue full: %d reports dropped so far", self.dropped)

    def submit_now(self, write: Write) -> None:
        """Run ``write`` at once in a task of its own: not queued behind reports and not
        held while binds are in flight. For writes something waits on (a preemption's
        evictions: its gang binds once they are done); ``drain`` and ``stop`` cover it."""
        task = asyncio.create_task(self._run(write))
        self._urgent.add(task)
        task.add_done_callback(self._urgent.discard)

    async def _work(self) -> None:
        while True:
            write = await self._queue.get()
            self._running += 1
            try:
                if self._quiet is not None and not self._quiet.is_set():
                    await self._wait_quiet(self._quiet)
                if self._urgent:
                    await asyncio.wait(set(self._urgent), timeout=self._max_delay)
                await self._run(write)
            finally:
                self._running -= 1
                self._queue.task_done()

    async def _run(self, write: Write) -> None:
        try:
            await write()
        except ApiError as err:
            self.failed += 1
            log.debug("report write failed: %s", err)
        except Exception:
            # The writer task is a boundary: a report is best effort, and one
            # unexpected error must not end every later report and Event.
            self.failed += 1
            log.exception("report write failed")

    async def _wait_quiet(self, quiet: asyncio.Event) -> None:
        # Not ``asyncio.wait_for``: on 3.11 it swallows a cancel that comes as the event
        # is set (the binds end as ``stop`` cancels us), and the worker would run on.
        waiter = asyncio.ensure_future(quiet.wait())
        try:
            await asyncio.wait({waiter}, timeout=self._max_delay)
        finally:
            waiter.cancel()

    async def drain(self, timeout: float) -> None:
        if self._urgent:
            await asyncio.wait(set(self._urgent), timeout=timeout)
        with contextlib.suppress(TimeoutError):
            async with asyncio.timeout(timeout):
                await self._queue.join()

    async def stop(self, timeout: float = 5.0) -> None:
        """Cancel the workers and urgent writes (queued writes are dropped); bounded,
        never hangs."""
        tasks, self._tasks = [*self._tasks, *self._urgent], []
        self._urgent = set()
        await cancel_all(tasks, timeout)


class EventRecorder:
    """core/v1 Events, the kind ``kubectl describe`` shows."""

    def __init__(self, api: Kube, writer: ApiWriter, component: str, instance: str) -> None:
        self._api = api
        self._writer = writer
        self._component = component
        self._instance = instance

    def event(self, ref: ObjectRef, type_: str, reason: str, message: str,
              annotations: Mapping[str, str] | None = None) -> None:
        """``annotations``: structured figures for programs (the message is for people)."""
        stamp = now_rfc3339()
        meta: dict[str, object] = {"generateName": f"{ref.name}.", "namespace": ref.namespace}
        if annotations:
            meta["annotations"] = dict(annotations)
        body = {
            "apiVersion": "v1",
            "kind": "Event",
            "metadata": meta,
            "involvedObject": {
                "kind": ref.kind,
                "apiVersion": ref.api_version,
                "namespace": ref.namespace,
                "name": ref.name,
                "uid": ref.uid,
            },
            "type": type_,
            "reason": reason,
            "message": message[:1024],
            "source": {"component": self._component},
            "reportingComponent": self._component,
            "reportingInstance": self._instance,
            "firstTimestamp": stamp,
            "lastTimestamp": stamp,
            "count": 1,
        }
        path = f"/api/v1/namespaces/{ref.namespace}/events"
        self._writer.submit(lambda: self._api.post(path, body))

    def pod_unschedulable(
        self,
        namespace: str,
        name: str,
        message: str,
        since: str,
        still_pending: Callable[[], bool] = lambda: True,
        reason: str = "Unschedulable",
    ) -> None:
        """Set ``PodScheduled=False, reason=<reason>`` (kube-scheduler's Unschedulable by
        default) with ``message``, merged by condition type. Skipped if, by the time the
        write runs, ``still_pending()`` says the pod was placed meanwhile: the binding set
        ``PodScheduled=True`` and a late False would be a lie."""
        body = {
            "status": {
                "conditions": [
                    {
                        "type": POD_SCHEDULED,
                        "status": "False",
                        "reason": reason,
                        "message": message,
                        "lastProbeTime": None,
                        "lastTransitionTime": since,
                    }
                ]
            }
        }
        path = pod_path(namespace, name, "status")

        async def write() -> None:
            if not still_pending():
                return
            try:
                await self._api.patch(path, body, "strategic")
            except ApiError as err:
                if err.status != 404:  # the pod is gone: nothing to report on
                    raise

        self._writer.submit(write)
