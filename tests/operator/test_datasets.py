"""Which warm-up pods get their node labelled: finished pods of a warm-up Job only."""

from __future__ import annotations

import json
from typing import Any

from trainmaster.api import DATASET_LABEL, dataset_label
from trainmaster.operator._datasets import (
    Warmed,
    label_patch,
    waiting_message,
    warm_nodes,
    warmed,
)
from trainmaster.spec import Job


def _pod(phase: str = "Succeeded", node: str | None = "n1", owner: str = "dev-warmup-wiki",
         dataset: str | None = "wiki") -> dict[str, Any]:  # fmt: skip
    labels = {DATASET_LABEL: dataset} if dataset else {}
    return {
        "metadata": {
            "name": "p",
            "labels": labels,
            "ownerReferences": [{"kind": "Job", "name": owner}],
        },
        "spec": {"nodeName": node} if node else {},
        "status": {"phase": phase},
    }


def test_finished_warmup_pod_labels_its_node() -> None:
    assert warmed(_pod()) == Warmed("n1", "wiki", ("wiki",), ())
    assert label_patch("wiki") == {"metadata": {"labels": {dataset_label("wiki"): "true"}}}


def test_unfinished_or_unplaced_pods_label_nothing() -> None:
    assert warmed(_pod(phase="Running")) is None
    assert warmed(_pod(phase="Failed")) is None
    assert warmed(_pod(node=None)) is None
    assert warmed(_pod(dataset=None)) is None


def test_a_pod_that_only_carries_the_label_labels_nothing() -> None:
    """Anyone may label a pod; only the warm-up Job of that dataset counts."""
    assert warmed(_pod(owner="my-job")) is None
    assert warmed(_pod(owner="dev-warmup-other")) is None
    pod = _pod()
    pod["metadata"]["ownerReferences"] = [{"kind": "ReplicaSet", "name": "dev-warmup-wiki"}]
    assert warmed(pod) is None


def test_the_termination_message_labels_what_the_cache_holds_and_unlabels_evictions(
) -> None:
    pod = _pod()
    message = {"dataset": "wiki", "held": ["books", "wiki"], "evicted": ["code", "wiki"]}
    pod["status"]["containerStatuses"] = [
        {"name": "warmup", "state": {"terminated": {"exitCode": 0,
                                                    "message": json.dumps(message)}}}]
    done = warmed(pod)
    assert done == Warmed("n1", "wiki", ("wiki", "books"), ("code",))
    assert label_patch(done.held, done.evicted) == {"metadata": {"labels": {
        dataset_label("wiki"): "true", dataset_label("books"): "true",
        dataset_label("code"): None}}}


def test_a_message_cannot_name_labels_that_are_not_dataset_names() -> None:
    pod = _pod()
    message = {"held": ["../x", "A", "ok", 3], "evicted": ["kubernetes.io/hostname"]}
    pod["status"]["containerStatuses"] = [
        {"state": {"terminated": {"message": json.dumps(message)}}}]
    done = warmed(pod)
    assert done is not None and done.held == ("wiki", "ok") and done.evicted == ()
    pod["status"]["containerStatuses"][0]["state"]["terminated"]["message"] = "not json"
    assert warmed(pod) == Warmed("n1", "wiki", ("wiki",), ())


def _job(datasets: list[str], nodes: int = 2) -> Job:
    return Job.model_validate({"name": "j", "image": "i:1", "launcher": "torchrun",
                               "nodes": nodes, "datasets": datasets})


def test_the_hold_names_each_dataset_short_of_nodes() -> None:
    job = _job(["wiki", "books"], nodes=3)
    assert waiting_message(job, {"wiki": 3, "books": 1}) == "dataset books warm on 1 of 3 nodes"
    assert waiting_message(job, {}) == ("dataset wiki warm on 0 of 3 nodes; "
                                        "dataset books warm on 0 of 3 nodes")
    assert waiting_message(job, {"wiki": 4, "books": 3}) is None


def test_cordoned_nodes_do_not_count() -> None:
    nodes = [{"spec": {}}, {"spec": {"unschedulable": True}}, {}]
    assert warm_nodes(nodes) == 2
