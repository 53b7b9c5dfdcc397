"""The runtime loop's per-gang records: one record per gang, dropped once idle."""

from __future__ import annotations

from trainmaster.scheduler.runtime.gangs import Waiting
from trainmaster.scheduler.runtime.records import GangRecords

from .builders import make_gang


def test_a_record_lives_while_it_says_something() -> None:
    records = GangRecords()
    gang = make_gang("g", 2)
    rec = records.get(gang.key)
    rec.queued, rec.first_seen = gang, 1.0
    records.settle(gang.key)
    assert records.queued() == {gang.key: gang}
    rec.queued, rec.first_seen = None, None
    records.settle(gang.key)
    assert records.peek(gang.key) is None  # idle: dropped


def test_views_and_the_next_retry() -> None:
    records = GangRecords()
    records.get("ns/a").retry_at = 5.0
    records.get("ns/b").held_until = 3.0
    records.get("ns/c").waiting = Waiting("ns/c", "PodGroup ns/c does not exist")
    assert records.next_retry() == 3.0
    assert records.held() == [("ns/b", 3.0)]
    assert list(records.waiting()) == ["ns/c"]
    assert records.queued() == {}
    assert GangRecords().next_retry() is None
