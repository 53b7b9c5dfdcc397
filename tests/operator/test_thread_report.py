"""thread_report: what an operator thread that will not stop was doing (its stack and its
event loop's tasks), for the error that says so."""

from __future__ import annotations

import asyncio
import threading
import time

from trainmaster.operator import thread_report


def test_the_report_names_the_stuck_thread_and_its_waiting_tasks() -> None:
    loops: list[asyncio.AbstractEventLoop] = []
    release = threading.Event()

    async def waits_for_a_slow_peer() -> None:
        await asyncio.sleep(30)

    async def main() -> None:
        loops.append(asyncio.get_running_loop())
        task = asyncio.create_task(waits_for_a_slow_peer(), name="slow-peer")
        while not release.is_set():
            time.sleep(0.01)  # the loop itself blocked, as a sync call in a handler would
        task.cancel()

    thread = threading.Thread(target=asyncio.run, args=(main(),), daemon=True)
    thread.start()
    while not loops:
        time.sleep(0.01)
    time.sleep(0.05)
    try:
        report = thread_report(thread, loops[0])
    finally:
        release.set()
        thread.join(10)
    assert "in main" in report and "time.sleep(0.01)" in report  # the thread's own stack
    assert "task slow-peer:" in report and "waits_for_a_slow_peer" in report
