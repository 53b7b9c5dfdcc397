"""Pulumi's mocks run on the current event loop; an earlier asyncio.run() in the same test
session (e.g. `cluster up`) closes and unsets it, so give every module a fresh one. A
conftest that imports ``event_loop_for_pulumi`` turns it on for its folder."""

from __future__ import annotations

import asyncio
from collections.abc import Iterator

import pytest


@pytest.fixture(autouse=True, scope="module")
def event_loop_for_pulumi() -> Iterator[None]:
    loop = asyncio.new_event_loop()
    asyncio.set_event_loop(loop)
    yield
    loop.close()
    asyncio.set_event_loop(None)
