"""Which warm-up pods set their node's cache state: pods of the warm-up Job of their
(node, dataset) only; what they set; and which nodes count for a held job."""

from __future__ import annotations

import json
from dataclasses import replace
from typing import Any

from trainmaster.api import APP_INSTANCE_LABEL, DATASET_LABEL, dataset_label
from trainmaster.objects import warmup_job_name
from trainmaster.operator._datasets import (
    Warmed,
    WarmupFailure,
    WarmupFailures,
    merged,
    ready_nodes,
    ready_patches,
    waiting_message,
    warmed,
    warmup_failure,
)
from trainmaster.operator._warm_targets import cache_state
from trainmaster.spec import Job

OWNER = warmup_job_name("dev", "wiki", "n1")


def _pod(phase: str = "Succeeded", node: str | None = "n1", owner: str = OWNER,
         dataset: str | None = "wiki", pinned: str = "n1") -> dict[str, Any]:  # fmt: skip
    labels = {DATASET_LABEL: dataset, APP_INSTANCE_LABEL: "dev"} if dataset else {}
    spec: dict[str, Any] = {"affinity": {"nodeAffinity": {
        "requiredDuringSchedulingIgnoredDuringExecution": {"nodeSelectorTerms": [
            {"matchFields": [{"key": "metadata.name", "operator": "In",
                              "values": [pinned]}]}]}}}}
    if node:
        spec["nodeName"] = node
    return {
        "metadata": {
            "name": "p",
            "labels": labels,
            "ownerReferences": [{"kind": "Job", "name": owner}],
        },
        "spec": spec,
        "status": {"phase": phase},
    }


def _node(name: str = "n1", labels: dict[str, str] | None = None, **spec: Any
          ) -> dict[str, Any]:
    return {"metadata": {"name": name, "labels": labels or {}},
            "spec": spec,
            "status": {"allocatable": {"nvidia.com/gpu": "8"},
                       "conditions": [{"type": "Ready", "status": "True"}],
                       "nodeInfo": {"bootID": "boot-1"}}}


def test_finished_warmup_pod_makes_its_node_ready() -> None:
    done = warmed(_pod())
    assert done is not None and replace(done, result="") == Warmed("n1", "wiki", ("wiki",), ())
    node = _node()
    node["metadata"].update(merged(ready_patches(done, node, "2026-12-05T06:00:00Z"))[
        "metadata"])
    state = cache_state(node, "wiki")
    assert (state.state, state.boot_id, state.time) == ("ready", "boot-1",
                                                         "2026-12-05T06:00:00Z")


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
    # The Job of another node (or dataset) does not count either.
    assert warmed(_pod(owner=warmup_job_name("dev", "wiki", "n2"))) is None
    assert warmed(_pod(node="n2")) is None  # pinned to n1, ran elsewhere


def test_the_termination_message_labels_what_the_cache_holds_and_unlabels_evictions(
) -> None:
    pod = _pod()
    message = {"dataset": "wiki", "held": ["books", "wiki"], "evicted": ["code", "wiki"]}
    pod["status"]["containerStatuses"] = [
        {"name": "warmup", "state": {"terminated": {"exitCode": 0,
                                                    "message": json.dumps(message)}}}]
    done = warmed(pod)
    assert done is not None and replace(done, result="") == Warmed(
        "n1", "wiki", ("wiki", "books"), ("code",))
    labels = merged(ready_patches(done, _node(), "t"))["metadata"]["labels"]
    assert labels == {dataset_label("wiki"): "ready", dataset_label("books"): "ready",
                      dataset_label("code"): "evicted"}


def test_a_message_cannot_name_labels_that_are_not_dataset_names() -> None:
    pod = _pod()
    message = {"held": ["../x", "A", "ok", 3], "evicted": ["kubernetes.io/hostname"]}
    pod["status"]["containerStatuses"] = [
        {"state": {"terminated": {"message": json.dumps(message)}}}]
    done = warmed(pod)
    assert done is not None and done.held == ("wiki", "ok") and done.evicted == ()
    pod["status"]["containerStatuses"][0]["state"]["terminated"]["message"] = "not json"
    again = warmed(pod)
    assert again is not None and replace(again, result="") == Warmed("n1", "wiki", ("wiki",), ())


def _job(datasets: list[str], nodes: int = 2) -> Job:
    return Job.model_validate({"name": "j", "image": "i:1", "launcher": "torchrun",
                               "nodes": nodes, "datasets": datasets})


def test_the_hold_names_each_dataset_short_of_nodes() -> None:
    job = _job(["wiki", "books"], nodes=3)
    assert waiting_message(job, {"wiki": 3, "books": 1}) == "dataset books warm on 1 of 3 nodes"
    assert waiting_message(job, {}) == ("dataset wiki warm on 0 of 3 nodes; "
                                        "dataset books warm on 0 of 3 nodes")
    assert waiting_message(job, {"wiki": 4, "books": 3}) is None


def test_only_ready_nodes_the_job_can_use_count() -> None:
    ready = {dataset_label("wiki"): "ready"}
    nodes = [
        _node("a", ready), _node("b", ready, unschedulable=True),
        _node("c", {dataset_label("wiki"): "warming"}),
        _node("d", ready, taints=[{"key": "team", "value": "x", "effect": "NoSchedule"}]),
        _node("e", {**ready, "pool": "big"}),
    ]
    job = _job(["wiki"])
    assert ready_nodes(job, "wiki", nodes) == 2  # a and e: b cordoned, c warming, d tainted
    picky = Job.model_validate({**job.model_dump(by_alias=True), "nodeSelector": {"pool": "big"}})
    assert ready_nodes(picky, "wiki", nodes) == 1
    tolerant = Job.model_validate({**job.model_dump(by_alias=True), "tolerations": [
        {"key": "team", "operator": "Exists"}]})
    assert ready_nodes(tolerant, "wiki", nodes) == 3


def _container(**state: object) -> dict[str, object]:
    return {"name": "warmup", "restartCount": state.pop("restarts", 0), **state}


def test_a_failed_warmup_says_why_from_its_termination_message() -> None:
    pod = _pod(phase="Failed")
    error = "--source s3://corpus/wiki: no bucket 'corpus' on the S3 server at http://s3:7070"
    pod["status"]["containerStatuses"] = [_container(state={"terminated": {
        "exitCode": 1, "message": json.dumps({"dataset": "wiki", "error": error})}})]
    failure = warmup_failure(pod)
    assert failure == WarmupFailure("wiki", "p", "n1", error, 0)
    assert failure.describe() == f"warm-up of dataset wiki failed on node n1 (pod p): {error}"


def test_a_restarting_warmup_reports_its_last_run_and_a_crash_its_last_log_line() -> None:
    pod = _pod(phase="Running")
    pod["status"]["containerStatuses"] = [_container(
        restarts=3, state={"waiting": {"reason": "CrashLoopBackOff"}},
        lastState={"terminated": {"exitCode": 2, "message": "starting\nKilled: out of memory"}})]
    assert warmup_failure(pod) == WarmupFailure("wiki", "p", "n1", "Killed: out of memory", 2)
    pod["status"]["containerStatuses"][0]["lastState"]["terminated"] = {"exitCode": 137,
                                                                       "reason": "OOMKilled"}
    assert warmup_failure(pod).message == "exit code 137 (OOMKilled)"  # type: ignore[union-attr]


def test_a_warmup_that_cannot_start_says_why() -> None:
    pod = _pod(phase="Pending")
    pod["status"]["containerStatuses"] = [_container(state={"waiting": {
        "reason": "CreateContainerConfigError", "message": 'secret "corpus-s3" not found'}})]
    assert warmup_failure(pod) == WarmupFailure(
        "wiki", "p", "n1", 'CreateContainerConfigError: secret "corpus-s3" not found', 0)


def test_a_warmup_that_cannot_be_placed_says_why() -> None:
    pod = _pod(phase="Pending", node=None)
    pod["status"]["conditions"] = [{"type": "PodScheduled", "status": "False",
                                    "reason": "Unschedulable",
                                    "message": "0/3 nodes are available: 1 Insufficient cpu."}]
    assert warmup_failure(pod) == WarmupFailure(
        "wiki", "p", "n1", "cannot be placed: 0/3 nodes are available: 1 Insufficient cpu.",
        0, unplaced=True)


def test_running_succeeded_and_foreign_pods_are_no_failure() -> None:
    running = _pod(phase="Running")
    running["status"]["containerStatuses"] = [_container(state={"running": {}})]
    assert warmup_failure(running) is None
    assert warmup_failure(_pod()) is None
    foreign = _pod(phase="Failed", owner="my-job")
    foreign["status"]["containerStatuses"] = [_container(state={"terminated": {"exitCode": 1}})]
    assert warmup_failure(foreign) is None


def test_the_failure_book_keeps_the_last_failure_until_a_warmup_succeeds() -> None:
    book = WarmupFailures()
    failed = _pod(phase="Failed")
    failed["status"]["containerStatuses"] = [_container(state={"terminated": {
        "exitCode": 1, "message": json.dumps({"error": "boom"})}})]
    job = _job(["books", "wiki"])
    assert book.observe("ns", failed) is True
    assert book.observe("ns", failed) is False  # the same failure is news once
    found = book.for_job("ns", job)
    assert found is not None and found.message == "boom"
    assert book.for_job("other", job) is None
    assert book.observe("ns", _pod()) is False  # a warm-up of wiki succeeded
    assert book.for_job("ns", job) is None


def test_a_warmup_placed_after_all_clears_its_failure() -> None:
    book = WarmupFailures()
    pending = _pod(phase="Pending", node=None)
    pending["status"]["conditions"] = [{"type": "PodScheduled", "status": "False",
                                        "reason": "Unschedulable", "message": "no cpu"}]
    assert book.observe("ns", pending) is True
    assert book.placed("ns", pending) is None  # still not placed
    running = _pod(phase="Running")
    running["status"]["containerStatuses"] = [_container(state={"running": {}})]
    placed = book.placed("ns", running)
    assert placed is not None and placed.unplaced
    assert book.for_job("ns", _job(["wiki"])) is None


def test_a_pods_result_is_applied_once() -> None:
    """The node records which pod's result it holds: a later event of the same pod (a
    relist after a restart, its deletion) does not undo what happened since."""
    done = warmed(_pod())
    assert done is not None and done.result.startswith(":")  # no uid in the test pod
    node = _node()
    node["metadata"].update(merged(ready_patches(done, node, "t"))["metadata"])
    assert cache_state(node, "wiki").result == done.result
    other = _pod()
    other["metadata"]["uid"] = "u2"
    assert warmed(other).result != done.result  # type: ignore[union-attr]
