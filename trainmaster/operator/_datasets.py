"""Node labels for warmed datasets: when the warm-up pod on a node has succeeded, the node
gets `dataset.trainmaster.io/<dataset>=true`.

The operator writes them because it may patch nodes anyway (fencing); the warm-up pods
themselves hold no API rights, so no pod of the training namespace can write to a node.
Only pods of a warm-up Job (`<cluster>-warmup-<dataset>`, as trainmaster.objects builds it)
count, so a pod that merely carries the label cannot get a node labelled.
"""

from __future__ import annotations

from typing import Any

from trainmaster.kubeclient import Kube, node_path
from trainmaster.objects import DATASET_LABEL, dataset_label


def warmed(pod: dict[str, Any]) -> tuple[str, str] | None:
    """(node, dataset) when `pod` is a warm-up pod that finished its node; else None."""
    meta = pod.get("metadata") or {}
    dataset = (meta.get("labels") or {}).get(DATASET_LABEL)
    node = (pod.get("spec") or {}).get("nodeName")
    if not dataset or not node or (pod.get("status") or {}).get("phase") != "Succeeded":
        return None
    owners = meta.get("ownerReferences") or []
    if not any(
        o.get("kind") == "Job" and str(o.get("name", "")).endswith(f"-warmup-{dataset}")
        for o in owners
    ):
        return None
    return node, dataset


def label_patch(dataset: str) -> dict[str, Any]:
    return {"metadata": {"labels": {dataset_label(dataset): "true"}}}


async def label_warmed_node(kube: Kube, pod: dict[str, Any]) -> tuple[str, str] | None:
    """Label the node of a finished warm-up pod; return what was labelled."""
    done = warmed(pod)
    if done is None:
        return None
    node, dataset = done
    await kube.patch(node_path(node), label_patch(dataset))
    return done
