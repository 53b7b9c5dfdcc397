"""A TrainingJob's spec is checked on its own against the cluster spec the operator read
(and validated) already; the messages name the TrainingJob's fields."""

from __future__ import annotations

from typing import Any

import pytest

from tests.helpers import stack_doc
from trainmaster.operator._specs import InvalidJob, check_job
from trainmaster.spec import Job, _semantic, validate_data


def _cluster_and_job() -> tuple[Any, dict[str, Any]]:
    doc = stack_doc("dev")
    return validate_data(doc, "dev.yaml"), doc["jobs"][0]


def test_a_valid_job_without_checking_the_cluster_again(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    spec, raw = _cluster_and_job()

    def whole_spec_checked(*_: object) -> None:
        raise AssertionError("the whole cluster spec was checked again")

    monkeypatch.setattr(_semantic, "check", whole_spec_checked)
    job = check_job(spec, raw["name"], raw)
    assert isinstance(job, Job) and job == spec.jobs[0]


def test_problems_name_the_trainingjob_fields() -> None:
    spec, raw = _cluster_and_job()
    bad = check_job(spec, raw["name"], {**raw, "nodes": 5, "gpuPerPod": 8})
    assert isinstance(bad, InvalidJob)
    assert str(bad).startswith("spec.gpuPerPod: unknown field: did you mean `gpusPerPod`?")
    bad = check_job(spec, raw["name"], {**raw, "nodes": 5})
    assert isinstance(bad, InvalidJob)
    assert str(bad).startswith("spec.nodes: 5 nodes do not fit in one leaf")
    bad = check_job(spec, "other", raw)
    assert str(bad) == "spec.name 'gpt-small' must equal metadata.name 'other'"


def test_a_job_priority_needs_the_priority_class_the_cluster_spec_renders() -> None:
    doc = stack_doc("dev")
    doc["jobs"][0]["priority"] = 500
    spec = validate_data(doc, "dev.yaml")
    raw = doc["jobs"][0]
    assert isinstance(check_job(spec, raw["name"], raw), Job)  # rendered for this job
    other = {**raw, "priority": 7}
    bad = check_job(spec, raw["name"], other)
    assert isinstance(bad, InvalidJob)
    assert str(bad).startswith("spec.priority: no PriorityClass for priority 7 in queue "
                               f"{raw['queue']}")
