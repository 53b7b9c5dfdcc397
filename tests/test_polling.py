"""The one poll-until-true loop."""

from __future__ import annotations

import asyncio

import pytest

from trainmaster.polling import WaitTimeout, wait_until, wait_until_async


def test_wait_until_returns_the_first_truthy_answer_or_names_what_it_waited_for() -> None:
    answers = iter([None, [], ["ready"]])
    assert wait_until(lambda: next(answers), "readiness", 5, every=0.01) == ["ready"]
    with pytest.raises(WaitTimeout, match=r"waiting for the moon \(last: 0\)"):
        wait_until(lambda: 0, "the moon", 0.05, every=0.01)

    async def never() -> None:
        return None

    with pytest.raises(TimeoutError, match="the sun"):
        asyncio.run(wait_until_async(never, "the sun", 0.05, every=0.01))
