"""The scheduler process's heap: its cache is hidden from the cycle collector, and slow
collections are logged."""

from __future__ import annotations

import gc
import logging
from collections.abc import Iterator

import pytest

from trainmaster.scheduler.runtime import heap


@pytest.fixture
def unfrozen() -> Iterator[None]:
    yield
    gc.unfreeze()  # this test process is not a scheduler: give the collector back its heap


def test_freeze_hides_what_is_alive_now_but_not_what_comes_later(unfrozen: None) -> None:
    cached = [{"metadata": {"name": f"n{i}"}} for i in range(1000)]
    heap.freeze()
    seen = {id(o) for o in gc.get_objects()}
    assert id(cached) not in seen and id(cached[0]) not in seen
    later: list[dict[str, object]] = [{"spec": {}}]
    assert id(later) in {id(o) for o in gc.get_objects()}


def test_a_slow_collection_is_logged(monkeypatch: pytest.MonkeyPatch,
                                     caplog: pytest.LogCaptureFixture) -> None:
    monkeypatch.setattr(heap, "SLOW_COLLECTION_SECONDS", 0.0)
    heap.log_slow_collections()
    heap.log_slow_collections()  # once only
    try:
        assert gc.callbacks.count(heap._timed) == 1
        with caplog.at_level(logging.DEBUG, logger="trainmaster.scheduler"):
            gc.collect()
        assert any("gc of generation 2 took" in r.getMessage() for r in caplog.records)
    finally:
        gc.callbacks.remove(heap._timed)


def test_no_collection_runs_while_the_cache_is_first_filled(unfrozen: None) -> None:
    assert gc.isenabled()
    with heap.collector_paused():
        assert not gc.isenabled()
        filled = [{"metadata": {"name": f"p{i}"}} for i in range(1000)]
    assert gc.isenabled()
    assert id(filled) not in {id(o) for o in gc.get_objects()}  # frozen on the way out
