"""Queue quotas and borrowing (``_quota``) and quota admission in the core's cycle."""

from __future__ import annotations

from trainmaster.scheduler import GangScheduler
from trainmaster.scheduler.framework.model import GPU, Gang
from trainmaster.scheduler.placement.place import Placement
from trainmaster.scheduler.plugins.quota import QueueLedger, QueueSpec, gang_gpus, queue_specs

from .builders import make_cluster, make_gang


def _ledger() -> QueueLedger:
    return QueueLedger([
        QueueSpec("research", nominal_quota=16, cohort="all"),
        QueueSpec("prod", nominal_quota=32, cohort="all", borrowing_limit=0),
        QueueSpec("solo", nominal_quota=8),
    ])  # fmt: skip


def test_within_quota_is_admitted_and_over_it_names_queue_and_numbers() -> None:
    ledger = QueueLedger([QueueSpec("solo", nominal_quota=64)])
    assert ledger.refusal("solo", 64) is None
    ledger.charge("a", "solo", 48)
    ledger.charge("b", "solo", 16)
    ledger.charge("b", "solo", 16)  # charged once per uid
    assert ledger.refusal("solo", 16) == "queue solo: 64/64 GPUs in use, gang needs 16"
    ledger.release("b")
    assert ledger.refusal("solo", 16) is None


def test_borrowing_uses_idle_cohort_quota_within_the_limit() -> None:
    ledger = _ledger()
    ledger.charge("r", "research", 16)
    assert ledger.refusal("research", 16) is None  # prod's 32 are idle: borrow 16
    ledger.charge("r2", "research", 16)
    assert ledger.borrowed("research") == 16
    assert ledger.lender_short("prod", 32) == 16  # prod needs its quota back
    ledger.charge("p", "prod", 16)
    refused = ledger.refusal("research", 8)
    assert refused is not None and "cohort all has only 0 idle GPUs" in refused
    # prod may not borrow (limit 0), and solo has no cohort
    ledger.release("r2")
    assert "borrowing limit 0" in str(ledger.refusal("prod", 24))
    ledger.charge("s", "solo", 8)
    assert ledger.refusal("solo", 1) == "queue solo: 8/8 GPUs in use, gang needs 1"


def test_unknown_queue_waits_and_unconfigured_default_is_unlimited() -> None:
    ledger = _ledger()
    assert ledger.refusal("default", 10_000) is None
    assert "queue nope does not exist" in str(ledger.refusal("nope", 1))


def test_config_entries_accept_gpu_quota_as_nominal_quota() -> None:
    specs = queue_specs([{"name": "a", "gpuQuota": 8},
                         {"name": "b", "nominalQuota": 4, "borrowingLimit": 2, "cohort": "c",
                          "preemption": False}])
    assert specs == [QueueSpec("a", 8), QueueSpec("b", 4, 2, "c", False)]


class _Admission:
    def __init__(self, ledger: QueueLedger, queue_of: dict[str, str]) -> None:
        self.ledger, self.queue_of = ledger, queue_of

    def refusal(self, gang: Gang) -> str | None:
        return self.ledger.refusal(self.queue_of[gang.key], gang_gpus(gang))

    def admitted(self, gang: Gang, placement: Placement) -> None:
        for b in placement.bindings:
            self.ledger.charge(b.pod.uid, self.queue_of[gang.key], b.pod.requests.get(GPU, 0))


def test_cycle_admits_gangs_of_a_queue_only_up_to_its_quota() -> None:
    ledger = QueueLedger([QueueSpec("research", nominal_quota=32)])
    gangs = [make_gang(f"g{i}", 2, gpus=8, created=float(i)) for i in range(3)]
    sched = GangScheduler(make_cluster(), admission=_Admission(
        ledger, {g.key: "research" for g in gangs}))
    for gang in gangs:
        sched.submit(gang)
    result = sched.run_cycle()
    assert [p.gang for p in result.placed] == ["default/g0", "default/g1"]
    assert [u.reason for u in result.unschedulable] == [
        "queue research: 32/32 GPUs in use, gang needs 16"]
    assert ledger.used("research") == 32


def test_reclaimable_from_names_the_borrowers_while_the_lender_is_within_quota() -> None:
    ledger = _ledger()
    ledger.charge("r", "research", 40)  # borrows 24 of prod's idle 32
    assert ledger.reclaimable_from("prod", 32) == {"research"}
    assert ledger.reclaimable_from("prod", 40) == set()  # beyond its own quota: no claim
    assert ledger.reclaimable_from("solo", 8) == set()  # no cohort
    assert ledger.reclaimable_from("research", 8) == set()  # over its quota itself
    ledger.release("r")
    assert ledger.reclaimable_from("prod", 32) == set()  # nobody borrows
