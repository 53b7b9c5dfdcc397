"""Which jobs' checkpoint mirrors the demo's S3 server holds: one rule (`served_mirror`)
for the buckets it creates and the mirror the demo then waits for."""

from __future__ import annotations

from typing import Any

import yaml

from tests.helpers import stack_doc
from trainmaster.drill import mirror_buckets, served_mirror
from trainmaster.spec import load_spec_text

ENDPOINT = "http://datasets.trainmaster.svc.cluster.local:7070"


def _spec(mirror: dict[str, Any]) -> Any:
    doc = stack_doc("demo")
    [lm] = [j for j in doc["jobs"] if j["name"] == "lm"]
    lm["checkpoint"]["mirror"] = mirror
    return load_spec_text(yaml.safe_dump(doc))


def _lm(spec: Any) -> Any:
    [lm] = [j for j in spec.jobs if j.name == "lm"]
    return lm


def test_the_demo_stacks_mirror_is_served_and_its_bucket_created() -> None:
    spec = _spec({"url": "s3://checkpoints/lm", "endpoint": ENDPOINT,
                  "credentialsSecret": "datasets-s3"})
    mirror = served_mirror(spec, _lm(spec))
    assert mirror is not None and mirror.url == "s3://checkpoints/lm"
    assert mirror_buckets(spec) == ["checkpoints"]


def test_a_mirror_with_another_secret_or_endpoint_is_not() -> None:
    for other in ({"url": "s3://c/lm", "endpoint": ENDPOINT, "credentialsSecret": "theirs"},
                  {"url": "s3://c/lm", "endpoint": "http://s3.example:9000",
                   "credentialsSecret": "datasets-s3"}):
        spec = _spec(other)
        assert served_mirror(spec, _lm(spec)) is None
        assert mirror_buckets(spec) == []
