"""Which warm-up pods get their node labelled: finished pods of a warm-up Job only."""

from __future__ import annotations

from typing import Any

from trainmaster.objects import DATASET_LABEL, dataset_label
from trainmaster.operator._datasets import label_patch, warmed


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
    assert warmed(_pod()) == ("n1", "wiki")
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
