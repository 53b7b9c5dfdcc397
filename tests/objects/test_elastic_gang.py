"""An elastic job's gang: maxNodes pods, minMember minNodes, the max in an annotation, and
no topology annotation when the job names none (the scheduler sizes it)."""

from __future__ import annotations

from typing import Any

from tests.helpers import stack_doc
from trainmaster.api import (
    MAX_MEMBERS_ANNOTATION,
    TOPOLOGY_DOMAIN_ANNOTATION,
    TOPOLOGY_MODE_ANNOTATION,
)
from trainmaster.objects import build_gang
from trainmaster.spec import validate_data


def _gang(job_changes: dict[str, Any], drop: tuple[str, ...] = ()) -> dict[str, dict[str, Any]]:
    doc = stack_doc("dev")
    job = doc["jobs"][0]
    for key in drop:
        job.pop(key, None)
    job.update(job_changes)
    spec = validate_data(doc, "dev.yaml")
    objs = build_gang(spec, spec.jobs[0], attempt=1)
    return {o["kind"]: o for o in objs if o["kind"] in ("PodGroup", "Job")}


def test_elastic_gang_has_max_pods_and_min_member() -> None:
    objs = _gang({"nodes": 2, "elastic": {"minNodes": 1, "maxNodes": 3}}, drop=("topology",))
    group, job = objs["PodGroup"], objs["Job"]
    assert group["spec"]["minMember"] == 1
    assert group["metadata"]["annotations"] == {MAX_MEMBERS_ANNOTATION: "3"}
    assert job["spec"]["completions"] == job["spec"]["parallelism"] == 3


def test_elastic_gang_keeps_its_own_topology() -> None:
    objs = _gang({"nodes": 2, "elastic": {"minNodes": 2, "maxNodes": 4}})
    annotations = objs["PodGroup"]["metadata"]["annotations"]
    assert annotations[TOPOLOGY_DOMAIN_ANNOTATION] == "leaf"
    assert annotations[TOPOLOGY_MODE_ANNOTATION] == "required"
    assert annotations[MAX_MEMBERS_ANNOTATION] == "4"
    assert objs["PodGroup"]["spec"]["minMember"] == 2


def test_rigid_gang_unchanged() -> None:
    objs = _gang({"nodes": 2})
    group = objs["PodGroup"]
    assert group["spec"]["minMember"] == 2
    assert MAX_MEMBERS_ANNOTATION not in group["metadata"]["annotations"]
    assert objs["Job"]["spec"]["completions"] == 2
