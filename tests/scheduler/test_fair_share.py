"""Quotas on every resource, hierarchical cohorts and DRF fair sharing (``QueueLedger``)."""

from __future__ import annotations

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from trainmaster.scheduler.framework.model import CPU, GPU
from trainmaster.scheduler.plugins.quota import (
    CohortSpec,
    FairSharing,
    QueueLedger,
    QueueSpec,
    ResourceQuota,
    cohort_specs,
    queue_specs,
)
from trainmaster.scheduler.state.fair_share import (
    LESS_THAN_INITIAL_SHARE,
    LESS_THAN_OR_EQUAL_TO_FINAL_SHARE,
)


def test_admission_checks_every_resource_it_has_a_quota_for() -> None:
    ledger = QueueLedger([QueueSpec("a", nominal_quota=8,
                                    resources={CPU: ResourceQuota(16_000)})])
    assert ledger.refusal("a", {GPU: 8, CPU: 16_000, "memory": 10**12}) is None
    ledger.charge("p", "a", {GPU: 4, CPU: 12_000, "memory": 10**12})
    refused = ledger.refusal("a", {GPU: 4, CPU: 8_000})
    assert refused == "queue a: 12 cpu of 16 cpu in use, gang needs 8 cpu"
    assert ledger.used("a", "memory") == 10**12  # recorded, not limited: no memory quota


def test_config_resources_and_weights_parse_with_the_units_given() -> None:
    units = {"64": 64_000, "8": 8, "2": 2}
    specs = queue_specs([{"name": "a", "cohort": "c", "fairSharing": {"weight": 3},
                          "resources": [{"name": GPU, "nominalQuota": 8, "lendingLimit": 2},
                                        {"name": CPU, "nominalQuota": "64"}]}],
                        lambda r, v: units[str(v)])
    assert specs[0].nominal_quota == 8 and specs[0].lending_limit == 2
    assert specs[0].resources == {CPU: ResourceQuota(64_000)} and specs[0].weight == 3.0
    cohorts = cohort_specs([{"name": "c", "parent": "org",
                             "resources": [{"name": GPU, "nominalQuota": 8}]}])
    assert cohorts == [CohortSpec("c", "org", {GPU: ResourceQuota(8)})]


def _tree(team_a_limit: int | None = None) -> QueueLedger:
    """org (8 GPUs of its own) <- team-a, team-b <- qa (4), qb (4)."""
    return QueueLedger(
        [QueueSpec("qa", nominal_quota=4, cohort="team-a"),
         QueueSpec("qb", nominal_quota=4, cohort="team-b")],
        cohorts=[CohortSpec("org", None, {GPU: ResourceQuota(8)}),
                 CohortSpec("team-a", "org", {GPU: ResourceQuota(0, team_a_limit)}),
                 CohortSpec("team-b", "org")])  # fmt: skip


def test_borrowing_walks_up_the_tree_within_each_levels_limit() -> None:
    ledger = _tree()
    assert ledger.refusal("qa", 16) is None  # its 4, qb's idle 4, org's own 8
    assert ledger.refusal("qa", 17) is not None
    limited = _tree(team_a_limit=2)  # team-a takes at most 2 beyond its subtree from org
    assert limited.refusal("qa", 6) is None
    refused = limited.refusal("qa", 7)
    assert refused == "queue qa: 0/4 GPUs in use, gang needs 7; cohort team-a has only 6 idle GPUs"


def test_lending_limit_keeps_the_rest_of_the_quota_for_the_lender() -> None:
    ledger = QueueLedger([QueueSpec("a", 8, cohort="c", lending_limit=2),
                          QueueSpec("b", 0, cohort="c")])
    assert ledger.refusal("b", 2) is None
    assert ledger.refusal("b", 3) is not None  # a lends only 2 of its 8


def test_reclaim_takes_back_only_from_those_that_borrowed_across_the_tree() -> None:
    ledger = _tree()
    ledger.charge("a", "qa", 14)  # qa borrows 10: qb's 4 and 6 of org's own
    assert ledger.reclaimable_from("qb", 2) == {"qa"}
    assert ledger.reclaimable_from("qb", 5) == set()  # beyond qb's nominal: not a reclaim
    ledger.release("a")
    ledger.charge("a", "qa", 4)
    assert ledger.reclaimable_from("qb", 2) == set()  # nobody borrows


def _fair(strategies: tuple[str, ...] = (LESS_THAN_OR_EQUAL_TO_FINAL_SHARE,
                                         LESS_THAN_INITIAL_SHARE),
          half_life: float | None = None, clock: list[float] | None = None) -> QueueLedger:
    now = clock if clock is not None else [0.0]
    return QueueLedger(
        [QueueSpec("w1", 0, cohort="c", weight=1), QueueSpec("w3", 0, cohort="c", weight=3)],
        cohorts=[CohortSpec("c", None, {GPU: ResourceQuota(16)})],
        fair=FairSharing(True, strategies, half_life), clock=lambda: now[0])


def test_share_is_the_dominant_borrowed_fraction_over_the_weight() -> None:
    ledger = _fair()
    ledger.charge("a", "w1", 4)
    ledger.charge("b", "w3", 4)
    assert ledger.share("w1") == pytest.approx(4 / 16)
    assert ledger.share("w3") == pytest.approx(4 / 16 / 3)
    assert ledger.share("w3", {GPU: 8}) == pytest.approx(12 / 16 / 3)


def test_borrowing_admission_goes_to_the_lower_share_first() -> None:
    ledger = _fair()
    ledger.charge("a", "w1", 4)
    ledger.charge("b", "w3", 4)
    ledger.set_waiting([("w1", {GPU: 4}), ("w3", {GPU: 4})])
    refused = ledger.refusal("w1", {GPU: 4})
    assert refused is not None and "queue w3 (share 0.167) goes before queue w1 (share 0.5)" \
        in refused
    assert ledger.refusal("w3", {GPU: 4}) is None


@pytest.mark.parametrize(("strategy", "expected"), [
    (LESS_THAN_OR_EQUAL_TO_FINAL_SHARE, 2),  # w3's share after must stay >= w1's 0.125
    (LESS_THAN_INITIAL_SHARE, 3),  # w3's share before must be > 0.125
])  # fmt: skip
def test_preemption_strategies_bound_how_much_a_borrower_loses(strategy: str,
                                                               expected: int) -> None:
    ledger = _fair((strategy,))
    for i in range(4):
        ledger.charge(f"v{i}", "w3", 4)  # w3 holds all 16: share 16/16/3
    running = [(f"v{i}", "w3", {GPU: 4}) for i in range(4)]
    victims = ledger.fair_victims("w1", {GPU: 2}, running)
    assert sorted(victims) == [f"v{i}" for i in range(expected)]
    assert ledger.short_in_tree("w1", {GPU: 2})


def test_decayed_usage_makes_yesterdays_heavy_user_yield() -> None:
    clock = [0.0]
    ledger = _fair(half_life=3600.0, clock=clock)
    ledger.charge("old", "w3", 16)
    clock[0] = 4 * 3600.0  # w3 ran everything for four half-lives, then stopped
    ledger.release("old")
    ledger.set_waiting([("w1", {GPU: 4}), ("w3", {GPU: 4})])
    assert ledger.refusal("w1", {GPU: 4}) is None
    assert "queue w1" in str(ledger.refusal("w3", {GPU: 4}))
    without = _fair()  # usage now only: both at 0, w3's weight wins
    without.set_waiting([("w1", {GPU: 4}), ("w3", {GPU: 4})])
    assert without.refusal("w3", {GPU: 4}) is None


_RESOURCES = (GPU, CPU)


@st.composite
def _ledgers(draw: st.DrawFn) -> QueueLedger:
    def quota() -> ResourceQuota:
        return ResourceQuota(draw(st.integers(0, 8)), draw(st.none() | st.integers(0, 8)),
                             draw(st.none() | st.integers(0, 8)))

    cohorts = [CohortSpec("root", None, {r: quota() for r in _RESOURCES})]
    for i in range(draw(st.integers(0, 3))):
        parent = draw(st.sampled_from([c.name for c in cohorts]))
        cohorts.append(CohortSpec(f"c{i}", parent, {r: quota() for r in _RESOURCES}))
    queues = []
    for i in range(draw(st.integers(1, 5))):
        own = {r: quota() for r in _RESOURCES}
        gpu = own.pop(GPU)
        queues.append(QueueSpec(f"q{i}", gpu.nominal, gpu.borrowing_limit,
                                draw(st.sampled_from([c.name for c in cohorts])),
                                lending_limit=gpu.lending_limit, resources=own))
    return QueueLedger(queues, cohorts=cohorts, fair=FairSharing(True))


@settings(max_examples=200, deadline=None)
@given(_ledgers(), st.lists(st.tuples(st.integers(0, 4), st.integers(0, 6),
                                      st.integers(0, 6), st.booleans()), max_size=40))
def test_no_queue_is_ever_charged_beyond_its_limits(
        ledger: QueueLedger, steps: list[tuple[int, int, int, bool]]) -> None:
    names = sorted(ledger.queues)
    live: list[str] = []
    for n, (q, gpus, cpus, release) in enumerate(steps):
        if release and live:
            ledger.release(live.pop(q % len(live)))
        queue = names[q % len(names)]
        need = {GPU: gpus, CPU: cpus}
        if ledger.refusal(queue, need) is None and not ledger.within_nominal(queue, need):
            ledger.charge(f"p{n}", queue, need)  # admitted by borrowing
            live.append(f"p{n}")
        assert ledger.charged_beyond_limits() == []


class _FullScan(QueueLedger):
    """The ledger without the quick no of ``may_yield``: every waiting queue is asked."""

    def _may_yield(self, node: object, need: object) -> bool:
        return True


@settings(max_examples=200, deadline=None)
@given(_ledgers(), st.lists(st.sampled_from([0.0, 0.5, 1.0, 3.0]), min_size=9, max_size=9),
       st.lists(st.tuples(st.integers(0, 4), st.integers(0, 6), st.integers(0, 6)),
                max_size=12),
       st.lists(st.tuples(st.integers(0, 4), st.integers(0, 6), st.integers(0, 6)),
                min_size=1, max_size=6),
       st.none() | st.just(60.0))
def test_the_quick_no_of_fair_refusal_never_changes_its_answer(
        ledger: QueueLedger, weights: list[float], charges: list[tuple[int, int, int]],
        waiting: list[tuple[int, int, int]], half_life: float | None) -> None:
    """``may_yield`` prunes subtrees that cannot go before the gang: the refusal (and its
    message) is that of the full pairwise scan, whatever the weights (0 included), the
    tree, the usage and the half-life."""
    now = [0.0]  # moves between charges; each refusal reads one instant
    queues = [QueueSpec(q.name, q.nominal_quota, q.borrowing_limit, q.cohort,
                        lending_limit=q.lending_limit, resources=q.resources,
                        weight=weights[i]) for i, q in enumerate(ledger.queues.values())]
    cohorts = [CohortSpec(c.name, c.parent, c.resources, weights[5 + i % 4])
               for i, c in enumerate(ledger.cohorts.values())]
    fair = FairSharing(True, usage_half_life=half_life)
    fast = QueueLedger(queues, cohorts=cohorts, fair=fair, clock=lambda: now[0])
    full = _FullScan(queues, cohorts=cohorts, fair=fair, clock=lambda: now[0])
    names = sorted(fast.queues)
    for n, (q, gpus, cpus) in enumerate(charges):
        now[0] += 7.0
        for one in (fast, full):
            one.charge(f"p{n}", names[q % len(names)], {GPU: gpus, CPU: cpus})
    entries = [(names[q % len(names)], {GPU: g, CPU: c}) for q, g, c in waiting]
    fast.set_waiting(entries)
    full.set_waiting(entries)
    for name in names:
        for need in ({GPU: 1}, {GPU: 4, CPU: 2}, {GPU: 9, CPU: 9}):
            assert fast.refusal(name, need) == full.refusal(name, need), (name, need)
