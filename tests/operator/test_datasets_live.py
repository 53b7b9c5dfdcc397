"""Per-node warm-ups on the real control plane (kwok nodes; the operator in a thread): the
operator warms every node a job that reads the dataset may use, once, and no other; a node
that joins later within a minute; a fenced node again when it returns; a warm-up that
cannot be placed is a failed state and an Event on the node. The node's state is what the
warm-up pod reported (the warm-up pods hold no API rights themselves)."""

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
from trainmaster.api import dataset_label
from trainmaster.objects import build_node_warmup, cache_config_name, warmup_job_name
from trainmaster.operator._fence import fence_patch, unfence_patch
from trainmaster.operator._model import utcnow

pytestmark = pytest.mark.integration


@pytest.fixture()
def world(cluster: LocalCluster, tmp_path: Path) -> Iterator[CacheWorld]:
    with cache_world(cluster, tmp_path) as made:
        yield made


def _ready(world: CacheWorld, node: str) -> dict[str, Any] | None:
    label, record = world.state(node)
    return record if label == "ready" else None


def _condition(status: dict[str, Any], kind: str) -> dict[str, Any] | None:
    return next((c for c in status.get("conditions") or [] if c.get("type") == kind), None)


def test_nodes_are_warmed_once_a_new_one_within_a_minute_a_fenced_one_when_it_returns(
        world: CacheWorld) -> None:
    env = world.env
    a, b = world.add_node("a"), world.add_node("b")
    cpu_only = world.add_node("cpu", gpus=0)  # in the pool, but no job of 8 GPUs fits
    env.create_job(world.reader(nodes=2))
    for node in (a, b):
        wait_for(lambda n=node: _ready(world, n), f"{world.dataset} ready on {node}")
    assert world.state(cpu_only) == (None, {})
    cluster = env.spec.metadata.name
    assert sorted(j["metadata"]["name"] for j in world.warmup_jobs()) == sorted(
        warmup_job_name(cluster, world.dataset, n) for n in (a, b))
    # The job counted the two ready nodes it can use, and started.
    wait_for(lambda: env.jobs("reader"), "the gang, once both nodes are ready")
    cond = _condition(env.status("reader"), "DatasetsReady")
    assert cond is not None and cond["status"] == "True"

    # A node that joins after the stack is up: warmed within a minute.
    joined_at = time.monotonic()
    late = world.add_node("late")
    wait_for(lambda: _ready(world, late), f"{world.dataset} ready on the new node {late}",
             timeout=60)
    took = time.monotonic() - joined_at
    print(f"new node {late} ready {took:.1f}s after it was created")
    assert took < 60

    # Fenced: the operator marks the state for a check; back in service, it warms again.
    def uids() -> dict[str, str]:
        return {j["metadata"]["name"]: j["metadata"]["uid"] for j in world.warmup_jobs()}

    before = uids()
    env.core.patch_node(a, fence_patch(world.node(a), "test: fenced", utcnow()))
    wait_for(lambda: world.state(a)[1].get("verify"), f"{a} marked for a check")
    assert world.state(a)[0] == "ready"  # still what it held; checked when it is back
    patch = unfence_patch(world.node(a))
    assert patch is not None
    env.core.patch_node(a, patch)
    job_a = warmup_job_name(cluster, world.dataset, a)

    def rewarmed() -> dict[str, Any] | None:
        record = _ready(world, a)
        again = uids().get(job_a)
        return record if record and not record.get("verify") and again \
            and again != before[job_a] else None

    wait_for(rewarmed, f"{a} warmed again (a new warm-up Job) after it returned")
    # The other nodes were not warmed again.
    after = uids()
    assert {n: after.get(n) for n in before if n != job_a} == {
        n: u for n, u in before.items() if n != job_a}


def test_a_warmup_that_cannot_be_placed_is_a_failed_state_and_an_event(
        world: CacheWorld) -> None:
    env = world.env
    small = world.add_node("small", cpu="500m")  # the warm-up asks for 1 CPU
    env.create_job(world.reader(nodes=1))

    def failed() -> dict[str, Any] | None:
        label, record = world.state(small)
        return record if label == "failed" else None

    record = wait_for(failed, f"the failed state on {small}")
    assert record["reason"].startswith("cannot be placed: ")
    assert "Insufficient cpu" in record["reason"]
    [event] = wait_for(lambda: [e for e in env.events("WarmupUnschedulable", "default")
                                if e["involvedObject"]["name"] == small],
                       "the WarmupUnschedulable Event on the node")
    assert event["type"] == "Warning" and world.dataset in event["message"]
    # The job held for the dataset shows it too.
    cond = wait_for(lambda: (c := _condition(env.status("reader"), "DatasetsReady"))
                    and c["reason"] == "WarmupFailed" and c, "WarmupFailed on the job")
    assert "cannot be placed" in cond["message"]


def test_the_states_follow_the_cache_held_and_evicted(world: CacheWorld) -> None:
    """A warm-up's termination message (what `trainmaster cache warm` writes) names what the
    node's cache holds and what it evicted: the node's states follow it."""
    env = world.env
    node = world.add_node("a")
    env.create_job(world.reader(nodes=1))
    wait_for(lambda: _ready(world, node), f"{world.dataset} ready on {node}")
    other, gone = f"{world.dataset}-other", f"{world.dataset}-gone"
    [pod] = env.core.list_namespaced_pod(
        env.namespace, label_selector=f"trainmaster.io/dataset={world.dataset}").items
    message = json.dumps({"dataset": world.dataset, "held": [world.dataset, other],
                          "evicted": [gone]})
    env.core.patch_node(node, {"metadata": {"labels": {dataset_label(gone): "ready"}}})
    # What the kubelet reports of a container that ended with a termination message.
    env.core.patch_namespaced_pod_status(pod.metadata.name, env.namespace, {"status": {
        "containerStatuses": [{
            "name": "warmup", "image": "trainmaster:test", "imageID": "", "ready": False,
            "restartCount": 0,
            "state": {"terminated": {"exitCode": 0, "reason": "Completed",
                                     "message": message}}}]}})

    def follows() -> bool:
        labels = world.node(node)["metadata"].get("labels") or {}
        return (labels.get(dataset_label(other)) == "ready"
                and labels.get(dataset_label(gone)) == "evicted")

    wait_for(follows, f"{other} ready and {gone} evicted on {node}")


def test_a_job_that_only_carries_the_labels_changes_no_state(world: CacheWorld) -> None:
    """Anyone who may create Jobs could label a pod; only the warm-up Job of that (node,
    dataset), by its name, counts."""
    env = world.env
    node = world.add_node("a")
    assert env.spec.cache is not None
    body = build_node_warmup(env.spec, env.spec.cache.datasets[0], node,
                             [{"operator": "Exists"}], simulated=True)
    body["metadata"]["name"] = f"not-a-warmup-{world.tag}"
    body["metadata"]["labels"].pop("app.kubernetes.io/component")  # not the operator's
    env.batch.create_namespaced_job(env.namespace, body)

    def succeeded() -> bool:
        pods = env.core.list_namespaced_pod(
            env.namespace, label_selector=f"trainmaster.io/dataset={world.dataset}").items
        return any(p.status.phase == "Succeeded" for p in pods)

    wait_for(succeeded, "the pod to succeed")
    time.sleep(3)  # the operator has seen the Succeeded event by now
    assert world.state(node) == (None, {})


def test_deleting_the_cache_config_takes_the_warmups_with_it(world: CacheWorld) -> None:
    """What `pulumi destroy` relies on: each warm-up Job is owned by the cache's ConfigMap,
    and the garbage collector deletes it with the ConfigMap."""
    env = world.env
    node = world.add_node("a")
    env.create_job(world.reader(nodes=1))
    wait_for(lambda: _ready(world, node), f"{world.dataset} ready on {node}")
    [job] = world.warmup_jobs()
    config = cache_config_name(env.spec.metadata.name)
    assert [(o["kind"], o["name"]) for o in job["metadata"]["ownerReferences"]] == [
        ("ConfigMap", config)]
    env.core.delete_namespaced_config_map(config, env.namespace)
    wait_for(lambda: not world.warmup_jobs(), "the warm-up Jobs garbage-collected")
