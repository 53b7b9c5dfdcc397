"""Stopping asyncio tasks for certain (``_tasks``), and the report writer's stop.

The hang this guards against: on Python 3.11 ``asyncio.wait_for`` swallows a cancel that
arrives as its inner future finishes. A scheduler that lost its lease cancelled its
binds (whose end wakes the report writers from waiting for "no bind in flight") and
then the writers, in the same loop turn: a writer swallowed the cancel and ``stop``
awaited it forever, so the replica never exited.
"""

from __future__ import annotations

import asyncio
import contextlib

from trainmaster.scheduler.runtime.events import ApiWriter
from trainmaster.tasks import cancel_all


async def _swallow_once() -> None:
    """Ignores the first cancel (as a 3.11 wait_for can), then waits for the next."""
    with contextlib.suppress(asyncio.CancelledError):
        await asyncio.sleep(100)
    await asyncio.sleep(100)


def test_cancel_all_cancels_again_a_task_that_swallowed_the_first_cancel() -> None:
    async def main() -> bool:
        task = asyncio.create_task(_swallow_once())
        await asyncio.sleep(0)
        return await cancel_all([task], timeout=5)

    assert asyncio.run(main()) is True


def test_cancel_all_gives_up_after_its_timeout() -> None:
    async def stubborn() -> None:
        while True:
            with contextlib.suppress(asyncio.CancelledError):
                await asyncio.sleep(100)

    async def main() -> tuple[bool, bool]:
        task = asyncio.create_task(stubborn())
        await asyncio.sleep(0)
        ended = await cancel_all([task], timeout=0.3, every=0.05)
        done = task.done()
        task.cancel()  # let asyncio.run finish (stubborn ignores this too: leave it)
        return ended, done

    loop = asyncio.new_event_loop()
    try:
        ended, done = loop.run_until_complete(main())
    finally:
        loop.close()
    assert (ended, done) == (False, False)


def test_writer_stops_when_the_binds_end_as_it_is_cancelled() -> None:
    """The lost-lease sequence of ``SchedulerRuntime.abort``: cancel the binds, await them
    (their end sets "quiet"), then stop the writer at once."""

    async def main() -> str:
        quiet = asyncio.Event()
        writer = ApiWriter(workers=2, quiet=quiet)
        writer.start()

        async def bind() -> None:
            quiet.clear()
            try:
                await asyncio.sleep(100)
            finally:
                quiet.set()

        binding = asyncio.create_task(bind())

        async def write() -> None:
            pass

        writer.submit(write)
        writer.submit(write)
        await asyncio.sleep(0.05)  # the writers now wait for quiet
        binding.cancel()
        with contextlib.suppress(asyncio.CancelledError):
            await binding
        await writer.stop()
        return "stopped"

    async def bounded() -> str:
        task = asyncio.create_task(main())
        done, _ = await asyncio.wait({task}, timeout=5)
        return task.result() if done else "hung"

    assert asyncio.run(bounded()) == "stopped"


def test_an_urgent_write_runs_while_binds_are_in_flight_and_reports_wait_for_it() -> None:
    """A preemption's evictions (``submit_now``) go out at once, even while binds hold the
    reports back; a report queued meanwhile waits until the evictions are done."""

    async def main() -> list[str]:
        quiet = asyncio.Event()  # a bind is in flight
        writer = ApiWriter(workers=1, quiet=quiet)
        writer.start()
        order: list[str] = []
        evicting = asyncio.Event()

        async def evict() -> None:
            order.append("evict sent")
            await evicting.wait()
            order.append("evict done")

        async def report() -> None:
            order.append("report")

        writer.submit(report)
        writer.submit_now(evict)
        await asyncio.sleep(0.05)
        assert order == ["evict sent"]  # the report waits for the bind, the eviction not
        quiet.set()  # the bind ended: the report still waits for the eviction
        await asyncio.sleep(0.05)
        assert order == ["evict sent"]
        evicting.set()
        await writer.drain(1)
        await writer.stop()
        return order

    assert asyncio.run(main()) == ["evict sent", "evict done", "report"]


def test_the_writer_backlog_counts_writes_queued_and_held_behind_binds_until_done() -> None:
    """The ``report_writes_queued`` gauge: a write held while a bind is in flight still
    counts; once binds end and the writes ran, the backlog is 0."""

    async def main() -> tuple[int, int, int, int]:
        quiet = asyncio.Event()  # cleared: a bind is in flight
        writer = ApiWriter(workers=1, quiet=quiet)
        ran: list[int] = []

        async def write() -> None:
            ran.append(1)

        for _ in range(3):
            writer.submit(write)
        queued = writer.backlog()
        writer.start()
        await asyncio.sleep(0.05)  # the one worker took a write and waits for quiet
        held = writer.backlog()
        quiet.set()
        await writer.drain(5.0)
        after = writer.backlog()
        await writer.stop()
        return queued, held, after, len(ran)

    assert asyncio.run(main()) == (3, 3, 0, 3)
