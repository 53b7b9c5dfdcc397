"""The operator holds a job until its datasets are warm on as many nodes as it has pods
(cache.waitForWarmup), and starts it at once when warm-up is optional; on the real
control plane. The nodes' cache states are set here as the operator sets them after a
warm-up (that path: test_datasets_live.py); `cache.nodeSelector` matches no node, so the
operator itself warms none of the shared cluster's nodes."""

from __future__ import annotations

import uuid
from collections.abc import Iterator
from pathlib import Path

import pytest

from tests.conftest import LocalCluster
from tests.operator.kit import OperatorEnv, job_doc, wait_for
from trainmaster.api import dataset_label
from trainmaster.spec import validate_data

pytestmark = pytest.mark.integration


def _env(cluster: LocalCluster, tmp_path: Path, dataset: str, wait: bool) -> OperatorEnv:
    env = OperatorEnv(cluster.kubeconfig, cluster.spec, tmp_path)
    data = env.spec.model_dump(by_alias=True, exclude_none=True, mode="json")
    data["cache"] = {"capacity": "100Gi", "warmup": True, "waitForWarmup": wait,
                     "nodeSelector": {"tmtest.trainmaster.io/none": dataset},
                     "datasets": [{"name": dataset, "source": f"file:///srv/{dataset}",
                                   "size": "1Gi"}]}
    env.spec = validate_data(data, "optest")
    return env


@pytest.fixture(params=[True, False], ids=["wait", "optional"])
def cache_env(request: pytest.FixtureRequest, cluster: LocalCluster, tmp_path: Path
              ) -> Iterator[tuple[OperatorEnv, str, bool]]:
    dataset = f"ds-{uuid.uuid4().hex[:6]}"
    env = _env(cluster, tmp_path, dataset, bool(request.param))
    label = dataset_label(dataset)
    try:
        env.setup()
        env.start_operator()
        yield env, dataset, bool(request.param)
    finally:
        for node in env.core.list_node(label_selector=label).items:
            env.core.patch_node(node.metadata.name, {"metadata": {"labels": {label: None}}})
        env.close()


def _schedulable(env: OperatorEnv) -> list[str]:
    return sorted(n.metadata.name for n in env.core.list_node().items
                  if not n.spec.unschedulable)


def _condition(status: dict[str, object], kind: str) -> dict[str, object] | None:
    conds = status.get("conditions") or []
    assert isinstance(conds, list)
    return next((c for c in conds if c.get("type") == kind), None)


def test_a_job_waits_for_its_dataset_unless_warmup_is_optional(
        cache_env: tuple[OperatorEnv, str, bool]) -> None:
    env, dataset, wait = cache_env
    doc = {**job_doc("reader", nodes=2), "datasets": [dataset]}
    env.create_job(doc)
    if not wait:
        wait_for(lambda: env.jobs("reader"), "the gang, at once")
        assert _condition(env.status("reader"), "DatasetsReady") is None
        return
    status = wait_for(lambda: (s := env.status("reader")).get("pendingReason") and s,
                      "the hold")
    assert status["pendingReason"] == f"dataset {dataset} warm on 0 of 2 nodes"
    assert status["phase"] == "Pending" and "attempt" not in status
    held = _condition(status, "DatasetsReady")
    assert held is not None and held["status"] == "False"
    assert held["reason"] == "WaitingForWarmup"
    wait_for(lambda: env.events("WaitingForDatasets"), "the WaitingForDatasets Event")
    assert env.jobs("reader") == []

    first, second = _schedulable(env)[:2]
    label = {"metadata": {"labels": {dataset_label(dataset): "ready"}}}
    # A node still warming counts for nothing.
    env.core.patch_node(second, {"metadata": {"labels": {dataset_label(dataset): "warming"}}})
    env.core.patch_node(first, label)
    wait_for(lambda: env.status("reader").get("pendingReason")
             == f"dataset {dataset} warm on 1 of 2 nodes", "the hold to count one node")
    assert env.jobs("reader") == []  # one warm node is not enough for two pods

    env.core.patch_node(second, label)
    wait_for(lambda: env.jobs("reader"), "the gang once two nodes are warm")

    def ready() -> dict[str, object] | None:
        cond = _condition(env.status("reader"), "DatasetsReady")
        return cond if cond is not None and cond["status"] == "True" else None

    assert wait_for(ready, "DatasetsReady=True")["reason"] == "Warm"
