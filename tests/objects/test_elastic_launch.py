"""What an elastic python gang's pods and Job carry for the elastic launcher and the operator:
TRAINMASTER_ELASTIC=MIN:MAX and the rendezvous port in every pod, and a Job that replaces
a lost member (per-index backoff) instead of failing at its first lost pod."""

from __future__ import annotations

from typing import Any

from tests.helpers import stack_doc
from trainmaster.objects import build_gang
from trainmaster.spec import validate_data


def _job(changes: dict[str, Any]) -> dict[str, Any]:
    doc = stack_doc("dev")
    doc["jobs"][0].pop("topology", None)
    doc["jobs"][0].update(changes)
    spec = validate_data(doc, "dev.yaml")
    return next(o for o in build_gang(spec, spec.jobs[0], attempt=1) if o["kind"] == "Job")


def _env(job: dict[str, Any]) -> dict[str, str]:
    container = next(c for c in job["spec"]["template"]["spec"]["containers"]
                     if c["name"] == "trainer")
    return {e["name"]: e.get("value", "") for e in container.get("env", [])}


def test_an_elastic_gang_tells_its_launchers_the_range_and_replaces_lost_members() -> None:
    # A python job: trainmaster's launchers rendezvous (a torchrun job uses torchrun's,
    # tests/objects/test_torchrun_launch.py).
    job = _job({"nodes": 2, "elastic": {"minNodes": 1, "maxNodes": 3}, "launcher": "python",
                "restartPolicy": {"maxRestarts": 5}})
    env = _env(job)
    assert env["TRAINMASTER_ELASTIC"] == "1:3"
    assert env["TRAINMASTER_RDZV_PORT"] == "29400"
    assert job["spec"]["backoffLimitPerIndex"] == 5
    assert job["spec"]["maxFailedIndexes"] == 0
    assert job["spec"]["podReplacementPolicy"] == "Failed"
    assert "backoffLimit" not in job["spec"]


def test_a_rigid_gang_fails_at_its_first_lost_pod_as_before() -> None:
    job = _job({"nodes": 2})
    assert "TRAINMASTER_ELASTIC" not in _env(job)
    assert job["spec"]["backoffLimit"] == 0
    assert "backoffLimitPerIndex" not in job["spec"]
