"""Which datasets the demo's S3 server stands in for: the dev stack's tinystories (its
endpoint is a Service of the stack's namespace), never a production store."""

from __future__ import annotations

from tests.helpers import STACKS
from trainmaster.drill import S3_PORT
from trainmaster.drill._datasets import served_here, story_shards
from trainmaster.spec import load_spec


def test_the_dev_stacks_dataset_is_served_by_the_demo() -> None:
    spec = load_spec(STACKS / "dev" / "cluster.yaml")
    [dataset] = served_here(spec)
    assert dataset.name == "tinystories" and dataset.source == "s3://datasets/tinystories"
    assert dataset.endpoint == f"http://datasets.trainmaster.svc.cluster.local:{S3_PORT}"
    assert dataset.credentials_secret == "datasets-s3"
    assert spec.cache is not None and spec.cache.wait_for_warmup


def test_a_production_store_is_never_stood_in_for() -> None:
    assert served_here(load_spec(STACKS / "prod-example" / "cluster.yaml")) == []


def test_the_made_up_shards_are_text_of_the_asked_size_and_repeatable() -> None:
    shards = story_shards(shards=3, size=4096, seed=1)
    assert len(shards) == 3 and all(len(s) >= 4096 for s in shards)
    assert shards == story_shards(shards=3, size=4096, seed=1)
    assert shards[0].decode().endswith(".\n")
