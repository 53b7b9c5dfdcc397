"""Which (node, dataset) pairs get a warm-up: every node a job that reads the dataset may
use, once; again when it returns to service, reboots or loses its state; never a node no
such job can use."""

from __future__ import annotations

from typing import Any

from tests.helpers import small_spec_doc
from trainmaster.api import UNHEALTHY_TAINT, dataset_label
from trainmaster.objects import build_node_warmup, warmup_job_name
from trainmaster.operator._warm_targets import (
    NodeCache,
    Plan,
    cache_state,
    plan,
    state_patch,
    tolerates,
)
from trainmaster.spec import ClusterSpec, Job, validate_data

REAL_TAINT = {"key": "trainmaster.io/real-node", "value": "true", "effect": "NoSchedule"}
GPU_TAINT = {"key": "nvidia.com/gpu", "value": "present", "effect": "NoSchedule"}


def _spec(**cache: Any) -> ClusterSpec:
    doc = small_spec_doc("dev")
    doc["cache"] = {"capacity": "1Ti", "datasets": [
        {"name": "wiki", "source": "s3://corpus/wiki", "size": "10Gi"},
        {"name": "books", "source": "s3://corpus/books", "size": "10Gi"}], **cache}
    return validate_data(doc, "test")


def _job(name: str = "reader", datasets: tuple[str, ...] = ("wiki",), **extra: Any) -> Job:
    return Job.model_validate({"name": name, "image": "i:1", "launcher": "torchrun",
                               "nodes": 1, "datasets": list(datasets), **extra})


def _node(name: str, labels: dict[str, str] | None = None, taints: list[dict[str, str]]
          | None = None, gpus: int = 8, ready: bool = True, boot: str = "b1",
          annotations: dict[str, str] | None = None, **spec: Any) -> dict[str, Any]:
    return {"metadata": {"name": name, "labels": labels or {},
                         "annotations": annotations or {}},
            "spec": {"taints": [GPU_TAINT, *(taints or [])], **spec},
            "status": {"allocatable": {"nvidia.com/gpu": str(gpus)},
                       "conditions": [{"type": "Ready", "status": str(ready)}],
                       "nodeInfo": {"bootID": boot}}}


def _with_state(node: dict[str, Any], dataset: str, state: NodeCache) -> dict[str, Any]:
    patch = state_patch(dataset, state)["metadata"]
    node["metadata"]["labels"].update(patch["labels"])
    node["metadata"]["annotations"].update(patch["annotations"])
    return node


def _plan(spec: ClusterSpec, jobs: list[Job], nodes: list[dict[str, Any]],
          existing: dict[str, bool] | None = None) -> Plan:
    names = {(n["metadata"]["name"], d.name): warmup_job_name("dev", d.name,
                                                              n["metadata"]["name"])
             for n in nodes for d in (spec.cache.datasets if spec.cache else [])}
    return plan(spec, jobs, nodes, names, existing or {}, simulated={"sim"})


def _started(p: Plan) -> set[tuple[str, str]]:
    return {(w.node, w.dataset) for w in p.start}


def test_every_node_a_reader_may_use_is_warmed_and_no_other() -> None:
    nodes = [_node("gpu-1"), _node("gpu-2"), _node("real", taints=[REAL_TAINT]),
             _node("cpu", gpus=0), _node("cordoned", unschedulable=True),
             _node("notready", ready=False)]
    p = _plan(_spec(), [_job()], nodes)
    assert _started(p) == {("gpu-1", "wiki"), ("gpu-2", "wiki")}  # nobody reads books
    # A job that tolerates and selects the real nodes has them warmed too, and its pods'
    # tolerations are the warm-up's.
    real = _job("on-real", nodeSelector={"pool": "real"},
                tolerations=[{"key": "trainmaster.io/real-node", "operator": "Exists",
                              "effect": "NoSchedule"}])
    nodes[2]["metadata"]["labels"]["pool"] = "real"
    p = _plan(_spec(), [real], nodes)
    assert _started(p) == {("real", "wiki")}
    assert {"key": "trainmaster.io/real-node", "operator": "Exists",
            "effect": "NoSchedule"} in p.start[0].toleration_list()


def test_a_warmed_node_is_warmed_once() -> None:
    ready = _with_state(_node("gpu-1"), "wiki", NodeCache("ready", boot_id="b1"))
    warming = _with_state(_node("gpu-2"), "wiki", NodeCache("warming"))
    evicted = _with_state(_node("gpu-3"), "wiki", NodeCache("evicted"))
    running = {warmup_job_name("dev", "wiki", "gpu-2"): True}
    assert _plan(_spec(), [_job()], [ready, warming, evicted], running) == Plan()


def test_a_warming_or_failed_node_without_its_job_is_warmed_again() -> None:
    gone = _with_state(_node("gpu-1"), "wiki", NodeCache("warming"))
    failed = _with_state(_node("gpu-2"), "wiki", NodeCache("failed", reason="boom"))
    done = {warmup_job_name("dev", "wiki", "gpu-2"): False}  # finished, waiting for its TTL
    assert _started(_plan(_spec(), [_job()], [gone, failed], done)) == {("gpu-1", "wiki")}
    assert _started(_plan(_spec(), [_job()], [gone, failed])) == {("gpu-1", "wiki"),
                                                                  ("gpu-2", "wiki")}


def test_a_node_that_leaves_service_is_checked_when_it_returns() -> None:
    ready = NodeCache("ready", boot_id="b1")
    # The node controller adds node.kubernetes.io/unschedulable to a cordoned node: the
    # job does not tolerate it, but the node is still one it could use once back.
    fenced = _with_state(_node("gpu-1", taints=[
        {"key": UNHEALTHY_TAINT, "value": "xid", "effect": "NoSchedule"},
        {"key": "node.kubernetes.io/unschedulable", "effect": "NoSchedule"}],
        unschedulable=True), "wiki", ready)
    p = _plan(_spec(), [_job()], [fenced])
    assert p.start == () and [(n, d) for n, d, _ in p.verify] == [("gpu-1", "wiki")]
    back = _with_state(_node("gpu-1"), "wiki", NodeCache("ready", boot_id="b1", verify=True))
    p = _plan(_spec(), [_job()], [back])
    assert [(w.node, w.why) for w in p.start] == [("gpu-1", "returned to service")]


def test_a_rebooted_node_is_checked() -> None:
    node = _with_state(_node("gpu-1", boot="b2"), "wiki", NodeCache("ready", boot_id="b1"))
    assert [w.why for w in _plan(_spec(), [_job()], [node]).start] == ["the node rebooted"]


def test_a_running_warmup_no_reader_may_use_any_more_is_cancelled() -> None:
    job = warmup_job_name("dev", "wiki", "gpu-1")
    p = _plan(_spec(), [], [_node("gpu-1")], {job: True})
    assert p.cancel == (job,)
    assert _plan(_spec(), [], [_node("gpu-1")], {job: False}).cancel == ()  # finished


def test_cache_node_selector_narrows_and_warmup_off_warms_nothing() -> None:
    nodes = [_node("gpu-1", {"disk": "nvme"}), _node("gpu-2")]
    assert _started(_plan(_spec(nodeSelector={"disk": "nvme"}), [_job()], nodes)) == {
        ("gpu-1", "wiki")}
    assert _plan(_spec(warmup=False), [_job()], nodes) == Plan()


def test_a_simulated_node_is_warmed_by_kwok() -> None:
    [warm] = _plan(_spec(), [_job()], [_node("sim")]).start
    assert warm.simulated
    body = build_node_warmup(_spec(), _spec().cache.datasets[0],  # type: ignore[union-attr]
                             "sim", warm.toleration_list(), simulated=True)
    pod = body["spec"]["template"]
    assert pod["metadata"]["labels"]["trainmaster.io/simulate"] == "complete"
    assert pod["spec"]["affinity"]["nodeAffinity"][
        "requiredDuringSchedulingIgnoredDuringExecution"]["nodeSelectorTerms"] == [
        {"matchFields": [{"key": "metadata.name", "operator": "In", "values": ["sim"]}]}]
    assert body["metadata"]["name"] == warmup_job_name("dev", "wiki", "sim")


def test_state_round_trips_through_label_and_annotation() -> None:
    node = _with_state(_node("n"), "wiki", NodeCache("failed", reason="no bucket", time="t"))
    assert node["metadata"]["labels"][dataset_label("wiki")] == "failed"
    assert cache_state(node, "wiki") == NodeCache("failed", reason="no bucket", time="t")
    assert cache_state(_node("n"), "wiki") == NodeCache()


def test_toleration_matching() -> None:
    taint = {"key": "k", "value": "v", "effect": "NoSchedule"}
    assert tolerates([{"key": "k", "operator": "Exists"}], taint)
    assert tolerates([{"operator": "Exists"}], taint)
    assert tolerates([{"key": "k", "operator": "Equal", "value": "v"}], taint)
    assert not tolerates([{"key": "k", "operator": "Equal", "value": "w"}], taint)
    assert not tolerates([{"key": "k", "operator": "Exists", "effect": "NoExecute"}], taint)


def test_the_warmup_job_name_fits_any_node_name() -> None:
    name = warmup_job_name("dev", "d" * 63, "n" * 253)
    assert len(name) <= 63 and name != warmup_job_name("dev", "d" * 63, "m" * 253)
