"""A failed warm-up is loud, and no job waits forever, on the real control plane: the
warm-up pod of a (node, dataset) runs on a kwok node of the test's pool (created here
before the job that reads the dataset, as the operator would create it, but left to
run), and its failure is what the kubelet reports of a
`trainmaster cache warm` that failed (status: Failed, exit code 1, the termination message
the command writes). Within 10 s the job held for the dataset carries it in its
DatasetsReady condition and in a WarmupFailed Event; after cache.warmupTimeoutMinutes it
fails with reason WarmupTimeout. The node's state of the dataset is `failed`, with the
error."""

from __future__ import annotations

import json
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from tests.conftest import LocalCluster
from tests.operator.cache_kit import CacheWorld, cache_world
from tests.operator.kit import wait_for
from trainmaster.api import DATASET_LABEL
from trainmaster.objects import build_node_warmup

pytestmark = pytest.mark.integration

ERROR = ("--source s3://corpus/wiki: the S3 server at http://10.244.0.1:7070 refused the "
         "credentials (SignatureDoesNotMatch); check AWS_ACCESS_KEY_ID and "
         "AWS_SECRET_ACCESS_KEY (the dataset's credentialsSecret)")


@pytest.fixture()
def world(cluster: LocalCluster, tmp_path: Path) -> Iterator[CacheWorld]:
    with cache_world(cluster, tmp_path, warmupTimeoutMinutes=1) as made:
        yield made


def _warmup_job(world: CacheWorld, node: str) -> dict[str, Any]:
    """The warm-up of (node, dataset) as the operator creates it, but not simulated (kwok
    leaves it running until the test says how it ended), with restartPolicy Never, and
    without the component label by which the operator lists its own (so that it does not
    cancel it before the job that reads the dataset exists)."""
    spec = world.env.spec
    assert spec.cache is not None
    body = build_node_warmup(spec, spec.cache.datasets[0], node, [{"operator": "Exists"}])
    body["metadata"]["labels"].pop("app.kubernetes.io/component")
    body["spec"]["backoffLimit"] = 0
    body["spec"]["template"]["spec"]["restartPolicy"] = "Never"
    return body


def _condition(status: dict[str, Any], kind: str) -> dict[str, Any] | None:
    return next((c for c in status.get("conditions") or [] if c.get("type") == kind), None)


def test_a_failed_warmup_shows_on_the_held_job_then_the_job_times_out(
        world: CacheWorld) -> None:
    env, dataset = world.env, world.dataset
    node = world.add_node("a")
    env.batch.create_namespaced_job(env.namespace, _warmup_job(world, node))
    env.create_job(world.reader(nodes=2))
    wait_for(lambda: env.status("reader").get("pendingReason"), "the hold")

    def running_pod() -> Any:
        pods = env.core.list_namespaced_pod(
            env.namespace, label_selector=f"{DATASET_LABEL}={dataset}").items
        return next((p for p in pods if p.status.phase == "Running"), None)

    pod = wait_for(running_pod, "the warm-up pod running on a kwok node")
    message = json.dumps({"dataset": dataset, "error": ERROR})
    failed_at = time.monotonic()
    env.core.patch_namespaced_pod_status(pod.metadata.name, env.namespace, {"status": {
        "phase": "Failed",
        "containerStatuses": [{
            "name": "warmup", "image": "trainmaster:test", "imageID": "", "ready": False,
            "restartCount": 0,
            "state": {"terminated": {"exitCode": 1, "reason": "Error", "message": message}}}]}})

    def shown() -> dict[str, Any] | None:
        cond = _condition(env.status("reader"), "DatasetsReady")
        return cond if cond and cond["reason"] == "WarmupFailed" else None

    cond = wait_for(shown, "the failure on the job's DatasetsReady condition", timeout=10)
    assert cond["status"] == "False"
    expected = (f"warm-up of dataset {dataset} failed on node {pod.spec.node_name} "
                f"(pod {pod.metadata.name}): {ERROR}")
    assert cond["message"] == f"dataset {dataset} warm on 0 of 2 nodes; {expected}"
    [event] = wait_for(lambda: env.events("WarmupFailed"), "the WarmupFailed Event",
                       timeout=max(0.5, 10 - (time.monotonic() - failed_at)))
    assert event["type"] == "Warning" and event["message"] == expected
    assert event["involvedObject"]["name"] == "reader"
    assert env.jobs("reader") == []
    label, record = world.state(node)
    assert label == "failed" and record["reason"] == ERROR

    # cache.warmupTimeoutMinutes: 1, counted from the first hold.
    status = env.wait_phase("reader", "Failed", timeout=120)
    failed = _condition(status, "Failed")
    assert failed is not None and failed["reason"] == "WarmupTimeout"
    assert "cache.warmupTimeoutMinutes 1" in failed["message"]
    assert f"last failure: {expected}" in failed["message"]
    assert env.jobs("reader") == []  # it never started
    wait_for(lambda: [e for e in env.events("Failed") if "WarmupTimeout" in e["message"]],
             "the Failed Event")
