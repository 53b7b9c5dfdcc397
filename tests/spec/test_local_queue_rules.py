"""`scheduler.localQueues`: each LocalQueue names a queue that exists, lives in a namespace
the scheduler serves (not the cluster's own), and is declared once; each problem names
its field and the fix."""

from __future__ import annotations

from typing import Any

import pytest
import yaml

from tests.helpers import STACKS
from trainmaster.spec import SpecInvalidError, validate_data


def _doc(local_queues: list[dict[str, str]], namespaces: list[str]) -> dict[str, Any]:
    doc = yaml.safe_load((STACKS / "dev" / "cluster.yaml").read_text())
    doc["scheduler"].update(namespaces=namespaces, localQueues=local_queues)
    return dict(doc)


def _issues(local_queues: list[dict[str, str]], namespaces: list[str]) -> dict[str, str]:
    with pytest.raises(SpecInvalidError) as err:
        validate_data(_doc(local_queues, namespaces), "cluster.yaml")
    return {i.path: i.message for i in err.value.issues}


def test_valid_local_queues_load() -> None:
    spec = validate_data(_doc([
        {"name": "lq", "namespace": "team-a", "clusterQueue": "research"},
        {"name": "lq", "namespace": "team-b", "clusterQueue": "default"},
    ], ["team-a", "team-b"]), "cluster.yaml")
    assert [(q.namespace, q.name, q.cluster_queue) for q in spec.scheduler.local_queues] == [
        ("team-a", "lq", "research"), ("team-b", "lq", "default")]


def test_each_problem_names_its_field_and_the_fix() -> None:
    issues = _issues([
        {"name": "lq", "namespace": "team-a", "clusterQueue": "nope"},
        {"name": "lq", "namespace": "team-z", "clusterQueue": "research"},
        {"name": "lq", "namespace": "trainmaster", "clusterQueue": "research"},
        {"name": "lq", "namespace": "team-a", "clusterQueue": "research"},
    ], ["team-a"])
    assert issues["scheduler.localQueues[0].clusterQueue"] == (
        "'nope' is not a queue of scheduler.queues: name one of default, research, or add it "
        "there")
    assert issues["scheduler.localQueues[1].namespace"] == (
        "namespace 'team-z' is not served by the scheduler: add it to scheduler.namespaces")
    assert "is the cluster's namespace" in issues["scheduler.localQueues[2].namespace"]
    assert issues["scheduler.localQueues[3].name"] == (
        "LocalQueue team-a/lq is declared more than once")
    assert len(issues) == 4


def test_field_shape_is_checked_by_the_model() -> None:
    issues = _issues([{"name": "lq", "namespace": "team-a"}], ["team-a"])
    assert "scheduler.localQueues[0].clusterQueue" in issues
