"""The one poll-until-true loop."""

from __future__ import annotations

import asyncio
import contextlib

import pytest

from trainmaster.polling import WaitTimeout, wait_event, wait_until, wait_until_async


def test_wait_until_returns_the_first_truthy_answer_or_names_what_it_waited_for() -> None:
    answers = iter([None, [], ["ready"]])
    assert wait_until(lambda: next(answers), "readiness", 5, every=0.01) == ["ready"]
    with pytest.raises(WaitTimeout, match=r"waiting for the moon \(last: 0\)"):
        wait_until(lambda: 0, "the moon", 0.05, every=0.01)

    async def never() -> None:
        return None

    with pytest.raises(TimeoutError, match="the sun"):
        asyncio.run(wait_until_async(never, "the sun", 0.05, every=0.01))


def test_wait_event_says_whether_the_event_came() -> None:
    async def main() -> tuple[bool, bool]:
        event = asyncio.Event()
        missed = await wait_event(event, 0.01)
        asyncio.get_running_loop().call_later(0.01, event.set)
        return missed, await wait_event(event, 5)

    assert asyncio.run(main()) == (False, True)


def test_a_cancellation_that_comes_as_the_event_is_set_ends_the_waiting_loop() -> None:
    """asyncio.wait_for on Python 3.11 lets this cancellation go (gh-86296): the event is
    set and the task cancelled in the same loop iteration, and the loop below ran on."""

    async def main() -> bool:
        event = asyncio.Event()
        rounds = 0

        async def loop() -> None:
            nonlocal rounds
            while True:
                await wait_event(event, 60)
                event.clear()
                rounds += 1
                await asyncio.sleep(0)

        task = asyncio.create_task(loop())
        await asyncio.sleep(0.01)
        event.set()
        task.cancel()
        with contextlib.suppress(asyncio.CancelledError):
            await asyncio.wait_for(task, 2)
        return task.cancelled()

    assert asyncio.run(main())
