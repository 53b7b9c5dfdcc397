"""The spec's rules for queues and cohorts: each problem names its field."""

from __future__ import annotations

from trainmaster.objects import config_fair_sharing, config_queues
from trainmaster.spec import SchedulerSpec, queue_issues


def _issues(section: dict[str, object]) -> dict[str, str]:
    spec = SchedulerSpec.model_validate(section)
    return {i.path: i.message for i in queue_issues(spec.queues, cohorts=spec.cohorts)}


def test_cohort_cycles_are_named_at_the_parent() -> None:
    issues = _issues({"queues": [{"name": "q", "nominalQuota": 1, "cohort": "a"}],
                      "cohorts": [{"name": "a", "parent": "b"}, {"name": "b", "parent": "a"}]})
    assert issues["scheduler.cohorts[0].parent"].startswith(
        "the cohorts' parents form a cycle (a -> b -> a)")


def test_limits_stay_within_quotas_and_quantities_parse() -> None:
    issues = _issues({"queues": [
        {"name": "q", "nominalQuota": 8, "lendingLimit": 9, "cohort": "c",
         "resources": [{"name": "cpu", "nominalQuota": "64", "lendingLimit": "65"},
                       {"name": "memory", "nominalQuota": "lots"}]},
        {"name": "solo", "resources": [{"name": "cpu", "nominalQuota": 4,
                                         "borrowingLimit": 2}]}]})
    assert issues["scheduler.queues[0].lendingLimit"] == \
        "lends more than nominalQuota: use at most 8"
    assert issues["scheduler.queues[0].resources[0].lendingLimit"] == \
        "lends more than nominalQuota: use at most 64"
    assert "is not a quantity" in issues["scheduler.queues[0].resources[1].nominalQuota"]
    assert "need a cohort" in issues["scheduler.queues[1].resources[0].borrowingLimit"]


def test_gpu_only_queues_render_as_before_and_new_fields_only_when_set() -> None:
    plain = SchedulerSpec.model_validate(
        {"queues": [{"name": "q", "nominalQuota": 8, "cohort": "c"}]})
    assert config_queues(plain.queues) == [
        {"name": "q", "nominalQuota": 8, "cohort": "c", "preemption": True}]
    assert config_fair_sharing(plain) == {}
    fair = SchedulerSpec.model_validate({
        "queues": [{"name": "q", "nominalQuota": 8, "cohort": "c",
                    "fairSharing": {"weight": 3},
                    "resources": [{"name": "cpu", "nominalQuota": "64"}]}],
        "cohorts": [{"name": "c", "parent": "org",
                     "resources": [{"name": "nvidia.com/gpu", "nominalQuota": 16}]}],
        "fairSharing": {"enable": True, "usageHalfLifeSeconds": 3600}})
    assert config_queues(fair.queues)[0]["resources"] == [{"name": "cpu", "nominalQuota": 64}]
    assert config_queues(fair.queues)[0]["fairSharing"] == {"weight": 3.0}
    assert config_fair_sharing(fair) == {
        "cohorts": [{"name": "c", "parent": "org",
                     "resources": [{"name": "nvidia.com/gpu", "nominalQuota": 16}]}],
        "fairSharing": {"enable": True, "preemptionStrategies": [
            "LessThanOrEqualToFinalShare", "LessThanInitialShare"]},
        "admissionFairSharing": {"usageHalfLifeSeconds": 3600.0}}


def test_a_cohorts_own_quota_counts_in_a_queues_ceiling() -> None:
    from trainmaster.spec._semantic import queue_ceiling

    spec = SchedulerSpec.model_validate({
        "queues": [{"name": "q", "nominalQuota": 0, "cohort": "team"}],
        "cohorts": [{"name": "team", "parent": "org"},
                    {"name": "org", "resources": [{"name": "nvidia.com/gpu",
                                                   "nominalQuota": 64}]}]})
    assert queue_ceiling(spec.queues, "q", spec.cohorts) == 64
    assert queue_ceiling(spec.queues, "q") == 0
