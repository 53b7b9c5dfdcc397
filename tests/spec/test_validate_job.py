"""One job validated against an already valid cluster says exactly what validating the whole
spec with that job in it says, without checking the cluster again."""

from __future__ import annotations

import copy
import json
from typing import Any

import pytest

from tests.helpers import STACKS, stack_doc
from tests.spec.test_rules import CASES, Mutation
from trainmaster.spec import SpecInvalidError, validate_data, validate_job

# The rules about one job (not about several jobs together, nor about the cluster).
JOB_CASES = [c for c in CASES if c[2].startswith("jobs[")
             and c[0] != "duplicate-job"]  # reported at jobs[i].name, but about two jobs


def _cluster_and_job(mutate: Mutation) -> tuple[dict[str, Any], int]:
    doc = stack_doc("dev")
    before = copy.deepcopy(doc["jobs"])
    mutate(doc)
    (index,) = [i for i, job in enumerate(doc["jobs"]) if job != before[i]]
    return doc, index


def _issues(exc: SpecInvalidError) -> list[tuple[str, str]]:
    return [(i.path, i.message) for i in exc.issues]


def test_the_job_cases_cover_schema_and_rules() -> None:
    assert len(JOB_CASES) >= 10


@pytest.mark.parametrize(
    ("mutate", "path", "message"), [c[1:] for c in JOB_CASES], ids=[c[0] for c in JOB_CASES]
)
def test_same_issues_as_the_whole_spec(mutate: Mutation, path: str, message: str) -> None:
    doc, index = _cluster_and_job(mutate)
    raw = doc["jobs"][index]
    cluster = validate_data({**doc, "jobs": []}, "dev.yaml")
    with pytest.raises(SpecInvalidError) as whole:
        validate_data({**doc, "jobs": [raw]}, "dev.yaml")
    with pytest.raises(SpecInvalidError) as alone:
        validate_job(cluster, raw, "job", path="jobs[0]")
    assert _issues(alone.value) == _issues(whole.value)
    assert any(message in m for _, m in _issues(alone.value))


def test_a_valid_job_is_the_model_the_whole_spec_builds() -> None:
    doc = stack_doc("dev")
    cluster = validate_data({**doc, "jobs": []}, "dev.yaml")
    whole = validate_data(doc, "dev.yaml")
    for raw, job in zip(doc["jobs"], whole.jobs, strict=True):
        assert validate_job(cluster, raw, "job") == job


def test_issues_are_named_under_the_given_path() -> None:
    doc = stack_doc("dev")
    cluster = validate_data(doc, "dev.yaml")
    raw = {**doc["jobs"][0], "nodes": 5, "queue": "nope", "gpuPerPod": 8}
    with pytest.raises(SpecInvalidError) as schema:
        validate_job(cluster, raw, "trainingjob x", path="spec")
    assert _issues(schema.value)[0][0] == "spec.gpuPerPod"
    del raw["gpuPerPod"]
    with pytest.raises(SpecInvalidError) as rules:
        validate_job(cluster, raw, "trainingjob x", path="spec")
    assert sorted(p for p, _ in _issues(rules.value)) == ["spec.nodes", "spec.queue"]
    with pytest.raises(SpecInvalidError) as not_a_mapping:
        validate_job(cluster, ["x"], "trainingjob x", path="spec")
    assert [p for p, _ in _issues(not_a_mapping.value)] == ["spec"]


def test_bench_job_times_both_ways(capsys: pytest.CaptureFixture[str]) -> None:
    from trainmaster.cli import main

    assert main(["bench", "job", "--spec", str(STACKS / "dev" / "cluster.yaml"),
                 "--runs", "3", "--json"]) == 0
    result = json.loads(capsys.readouterr().out)
    assert result["nodes"] == 8 and result["runs"] == 3
    assert 0 < result["job_min"] <= result["job_median"]
    assert 0 < result["whole_min"] <= result["whole_median"]
