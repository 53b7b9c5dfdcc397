"""The operator labels a node once the dataset warm-up pod on it has succeeded (the
warm-up pods hold no API rights themselves), on the real control plane."""

from __future__ import annotations

import json
import time
import uuid
from typing import Any

import pytest

from tests.operator.kit import OperatorEnv, wait_for
from trainmaster.api import DATASET_LABEL, dataset_label

pytestmark = pytest.mark.integration


def _warmup_job(name: str, dataset: str, labels: dict[str, str]) -> dict[str, Any]:
    return {
        "apiVersion": "batch/v1",
        "kind": "Job",
        "metadata": {"name": name},
        "spec": {
            "backoffLimit": 0,
            "template": {
                "metadata": {"labels": {DATASET_LABEL: dataset, **labels}},
                "spec": {
                    "restartPolicy": "Never",
                    "automountServiceAccountToken": False,
                    "tolerations": [{"operator": "Exists"}],
                    "containers": [{"name": "warmup", "image": "busybox:1.36"}],
                },
            },
        },
    }


def test_a_finished_warmup_labels_its_node(env: OperatorEnv) -> None:
    dataset = f"ds-{uuid.uuid4().hex[:6]}"
    label = dataset_label(dataset)
    # The pod finishes (kwok) as soon as it runs.
    env.batch.create_namespaced_job(
        env.namespace,
        _warmup_job(f"optest-warmup-{dataset}", dataset, {"trainmaster.io/simulate": "complete"}),
    )

    def finished_node() -> str | None:
        for pod in env.core.list_namespaced_pod(
            env.namespace, label_selector=f"{DATASET_LABEL}={dataset}"
        ).items:
            if pod.status.phase == "Succeeded":
                return str(pod.spec.node_name)
        return None

    node = wait_for(finished_node, "the warm-up pod to succeed")
    try:
        wait_for(
            lambda: (env.core.read_node(node).metadata.labels or {}).get(label) == "true",
            f"label {label} on node {node}",
        )
        labelled = [
            n.metadata.name for n in env.core.list_node(label_selector=f"{label}=true").items
        ]
        assert labelled == [node]
    finally:
        env.core.patch_node(node, {"metadata": {"labels": {label: None}}})


def test_a_job_that_only_carries_the_label_labels_nothing(env: OperatorEnv) -> None:
    dataset = f"ds-{uuid.uuid4().hex[:6]}"
    env.batch.create_namespaced_job(
        env.namespace,
        _warmup_job(
            f"not-a-warmup-{uuid.uuid4().hex[:4]}", dataset, {"trainmaster.io/simulate": "complete"}
        ),
    )

    def succeeded() -> bool:
        pods = env.core.list_namespaced_pod(
            env.namespace, label_selector=f"{DATASET_LABEL}={dataset}"
        ).items
        return any(p.status.phase == "Succeeded" for p in pods)

    wait_for(succeeded, "the pod to succeed")
    # The operator has seen the Succeeded event by the time a later object's event
    # arrives; give it a moment, then no node may carry the label.
    time.sleep(3)
    assert env.core.list_node(label_selector=f"{dataset_label(dataset)}=true").items == []


def test_the_labels_follow_the_cache_held_and_evicted(env: OperatorEnv) -> None:
    """A warm-up's termination message (what `trainmaster cache warm` writes) names what the
    node's cache holds and what it evicted: the node's labels follow it."""
    dataset, other, gone = (f"ds-{uuid.uuid4().hex[:6]}" for _ in range(3))
    env.batch.create_namespaced_job(
        env.namespace,
        _warmup_job(f"optest-warmup-{dataset}", dataset, {"trainmaster.io/simulate": "complete"}),
    )

    def finished() -> Any:
        for pod in env.core.list_namespaced_pod(
            env.namespace, label_selector=f"{DATASET_LABEL}={dataset}"
        ).items:
            if pod.status.phase == "Succeeded":
                return pod
        return None

    pod = wait_for(finished, "the warm-up pod to succeed")
    node = str(pod.spec.node_name)
    labels = [dataset_label(d) for d in (dataset, other, gone)]
    try:
        # The evicted dataset's label is there from an earlier warm-up.
        env.core.patch_node(node, {"metadata": {"labels": {labels[2]: "true"}}})
        message = json.dumps({"dataset": dataset, "held": [dataset, other], "evicted": [gone]})
        # What the kubelet reports of a container that ended with a termination message.
        env.core.patch_namespaced_pod_status(pod.metadata.name, env.namespace, {"status": {
            "containerStatuses": [{
                "name": "warmup", "image": "busybox:1.36", "imageID": "", "ready": False,
                "restartCount": 0,
                "state": {"terminated": {"exitCode": 0, "reason": "Completed",
                                         "message": message}}}]}})

        def follows() -> bool:
            now = env.core.read_node(node).metadata.labels or {}
            return (now.get(labels[0]) == "true" and now.get(labels[1]) == "true"
                    and labels[2] not in now)

        wait_for(follows, f"labels of {dataset} and {other}, none of {gone}, on {node}")
    finally:
        env.core.patch_node(node, {"metadata": {"labels": dict.fromkeys(labels)}})
