"""The queues' decayed usage, saved by one leader and restored by the next: the new
ledger reads the same averages, and so the same fair-share order, as the old one would
have at that moment. (The live failover, with a SIGKILLed leader, is not covered here.)"""

from __future__ import annotations

import pytest
import yaml

from trainmaster.scheduler.framework.model import GPU
from trainmaster.scheduler.plugins.quota import (
    CohortSpec,
    FairSharing,
    QueueLedger,
    QueueSpec,
    ResourceQuota,
)
from trainmaster.scheduler.runtime.config import ConfigError, SchedulerConfig
from trainmaster.scheduler.runtime.history import history_document, parse_history

HALF_LIFE = 600.0


def _ledger(now: list[float], half_life: float | None = HALF_LIFE) -> QueueLedger:
    """Two queues that only borrow from their cohort's 16 GPUs: who goes first is fair
    sharing's call, over their decayed usage."""
    queues = [QueueSpec("a", 0, cohort="lab"), QueueSpec("b", 0, cohort="lab")]
    return QueueLedger(queues, cohorts=[CohortSpec("lab", None, {GPU: ResourceQuota(16)})],
                       fair=FairSharing(True, usage_half_life=half_life),
                       clock=lambda: now[0])


def test_a_new_leader_reads_the_averages_the_old_one_would_have() -> None:
    now = [0.0]
    old = _ledger(now)
    old.charge("a-0", "a", {GPU: 16})  # queue a runs a gang for five minutes, b nothing
    now[0] = 300.0
    old.release("a-0")
    saved = history_document("sched", old.history(), saved=1_000_000.0)
    assert saved["queues"]["a"][GPU] > 0 and saved["queues"]["b"][GPU] == 0

    parsed = parse_history(yaml.safe_dump(saved))
    assert parsed is not None
    averages, when = parsed
    # The new leader starts 40 s after the write, on its own monotonic clock.
    later = [5.0]
    new = _ledger(later)
    assert new.restore(averages, age=40.0) == ["a", "b"]
    now[0] = 340.0
    assert new.average_usage("a")[GPU] == pytest.approx(old.average_usage("a")[GPU])
    assert new.average_usage("b")[GPU] == 0
    # So the same order: with a gang of each waiting, b's (no history) goes first, where
    # a leader without the history would let a's through (a tie).
    gang = {GPU: 8}
    for ledger in (old, new):
        ledger.set_waiting([("a", gang), ("b", gang)])
        refusal = ledger.fair_refusal("a", gang)
        assert refusal is not None and "goes before" in refusal, refusal
        assert ledger.fair_refusal("b", gang) is None
    fresh = _ledger([5.0])
    fresh.set_waiting([("a", gang), ("b", gang)])
    assert fresh.fair_refusal("a", gang) is None
    assert when == 1_000_000.0


def test_without_a_half_life_there_is_nothing_to_keep() -> None:
    ledger = _ledger([0.0], half_life=None)
    assert ledger.history() == {}
    assert ledger.restore({"a": {GPU: 8.0}}, 1.0) == []


def test_queues_no_longer_configured_are_ignored_and_garbage_is_no_history() -> None:
    ledger = _ledger([0.0])
    assert ledger.restore({"gone": {GPU: 8.0}, "b": {GPU: 2.0}}, 0.0) == ["b"]
    assert parse_history("not: [a, history") is None
    assert parse_history("queues: {}") is None  # no savedAt
    assert parse_history("") is None


def test_the_interval_is_configurable_and_checked() -> None:
    assert SchedulerConfig.from_mapping({}).usage_history_interval == 30.0
    config = SchedulerConfig.from_mapping({"usageHistoryIntervalSeconds": 5})
    assert config.usage_history_interval == 5.0
    with pytest.raises(ConfigError, match="usageHistoryIntervalSeconds"):
        SchedulerConfig.from_mapping({"usageHistoryIntervalSeconds": "often"})
