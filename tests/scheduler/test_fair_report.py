"""``fair_report``: the queue tree as status, the web view and the plan show it."""

from __future__ import annotations

import json
import math

import pytest

from trainmaster.scheduler import (
    CohortSpec,
    FairSharing,
    QueueSpec,
    ResourceQuota,
    charged_ledger,
    fair_report,
)
from trainmaster.scheduler.framework.model import CPU, GPU
from trainmaster.simulate._fairness import FairnessMeter
from trainmaster.simulate._queues import QueueConfig


def test_shares_are_the_ledgers_and_the_tree_is_listed_depth_first() -> None:
    queues = [QueueSpec("a", 8, cohort="lab", weight=1.0),
              QueueSpec("b", 8, cohort="lab", weight=3.0),
              QueueSpec("z", 4, cohort="ops", resources={CPU: ResourceQuota(8_000)}),
              QueueSpec("solo", 4)]
    cohorts = [CohortSpec("root", None, {GPU: ResourceQuota(16)}),
               CohortSpec("lab", "root", weight=2.0), CohortSpec("ops", "root")]
    ledger = charged_ledger(queues, cohorts, FairSharing(True),
                            {"a": {GPU: 20}, "b": {GPU: 2}, "z": {GPU: 4, CPU: 9_000}})
    report = fair_report(ledger)
    assert [(n.depth, n.kind, n.name) for n in report.nodes] == [
        (0, "cohort", "root"), (1, "cohort", "lab"), (2, "queue", "a"), (2, "queue", "b"),
        (1, "cohort", "ops"), (2, "queue", "z"), (0, "queue", "solo")]
    for node in report.queues:
        assert node.share == ledger.share(node.name)
    a, z = report.queue("a"), report.queue("z")
    assert a is not None and z is not None
    assert a.share == pytest.approx(12 / 16)  # 12 borrowed of lab's 16 lendable, weight 1
    assert z.share == pytest.approx(1_000 / 8_000)  # cpu is its dominant resource
    lab = report.cohort("lab")
    assert lab is not None and lab.entitlement == pytest.approx(2 / 3)
    assert lab.entitled[GPU] == pytest.approx(2 / 3 * 36)  # root's pool: 16 + 16 + 4
    solo = report.queue("solo")
    assert solo is not None and (solo.entitlement, solo.share) == (None, 0.0)


def test_lent_is_what_others_use_of_idle_quota_pro_rata_and_never_more() -> None:
    queues = [QueueSpec("a", 8, cohort="c"), QueueSpec("b", 8, cohort="c"),
              QueueSpec("d", 8, cohort="c")]
    ledger = charged_ledger(queues, (), FairSharing(True), {"a": {GPU: 14}, "b": {GPU: 4}})
    report = fair_report(ledger)
    lent = {n.name: n.resources[0].lent for n in report.queues}
    borrowed = {n.name: n.resources[0].borrowed for n in report.queues}
    assert borrowed == {"a": 6, "b": 0, "d": 0}
    # 6 borrowed from b's 4 idle and d's 8 idle: 6*4//12 and 6*8//12.
    assert lent == {"a": 0, "b": 2, "d": 4}
    assert sum(lent.values()) <= sum(borrowed.values())


def test_weight_zero_borrowing_is_an_infinite_share_in_json() -> None:
    ledger = charged_ledger([QueueSpec("a", 2, cohort="c", weight=0.0),
                             QueueSpec("b", 8, cohort="c")], (), FairSharing(True),
                            {"a": {GPU: 4}})
    (a_json,) = [n for n in fair_report(ledger).to_json()["nodes"] if n["name"] == "a"]
    assert a_json["share"] is None and a_json["share_infinite"] is True
    assert math.isinf(fair_report(ledger).queue("a").share)  # type: ignore[union-attr]
    json.dumps(fair_report(ledger).to_json(), allow_nan=False)


def test_a_flat_cohorts_entitlement_is_the_simulators() -> None:
    queues = (QueueSpec("light", 0, cohort="lab", weight=1.0),
              QueueSpec("mid", 0, cohort="lab", weight=2.0),
              QueueSpec("heavy", 0, cohort="lab", weight=3.0))
    cohorts = (CohortSpec("lab", None, {GPU: ResourceQuota(160)}),)
    report = fair_report(charged_ledger(queues, cohorts, FairSharing(True)))
    meter = FairnessMeter(QueueConfig(queues=queues, cohorts=cohorts, fair=FairSharing(True)))
    for q in queues:
        node = report.queue(q.name)
        assert node is not None and node.entitlement == pytest.approx(meter.entitlement[q.name])
    heavy = report.queue("heavy")
    assert heavy is not None and heavy.entitled[GPU] == pytest.approx(80.0)
