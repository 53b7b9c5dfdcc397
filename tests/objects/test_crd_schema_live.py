"""The generated TrainingJob CRD on the real API server: accepted as a structural schema,
Established, and judging TrainingJobs as the model does (bounds and enums rejected at
admission, unknown fields and unions kept for the operator to name)."""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

import pytest

from tests.conftest import LocalCluster
from tests.helpers import throwaway_namespace
from trainmaster import api
from trainmaster.kubeclient import ApiError, SyncKube, crd_path, trainingjob_path
from trainmaster.objects import trainingjob_crd
from trainmaster.polling import wait_until

pytestmark = pytest.mark.integration


@pytest.fixture()
def kube(local_cluster: LocalCluster) -> Iterator[SyncKube]:
    with SyncKube.connect(local_cluster.kubeconfig) as client:
        crd = trainingjob_crd()
        client.apply(crd)  # server-side apply: a non-structural schema is a 422 here
        name = crd["metadata"]["name"]

        def established() -> bool:
            conditions = (client.get(crd_path(name)).get("status") or {}).get("conditions")
            return any(c.get("type") == api.CRD_ESTABLISHED and c.get("status") == "True"
                       for c in conditions or [])

        wait_until(established, "the TrainingJob CRD", 60)
        yield client


@pytest.fixture()
def namespace(kube: SyncKube) -> Iterator[str]:
    with throwaway_namespace(kube, "tmcrd") as name:
        yield name


def _job(name: str, **spec: Any) -> dict[str, Any]:
    return {"apiVersion": api.API_VERSION, "kind": api.TRAININGJOB_KIND,
            "metadata": {"name": name},
            "spec": {"name": name, "image": "img:1", "launcher": "torchrun", "nodes": 2, **spec}}


def test_the_generated_crd_is_served_and_judges_jobs_as_the_model(
        kube: SyncKube, namespace: str) -> None:
    stored = kube.post(trainingjob_path(namespace), _job(
        "ok", cpuPerPod=None, hyperParameters={"lr": 0.1, "warmup": True, "name": "x"},
        restartPolicy={"retryableExitCodes": [1, 137]}, tolerations=[{"operator": "Exists"}]))
    assert stored["spec"]["hyperParameters"] == {"lr": 0.1, "warmup": True, "name": "x"}
    assert stored["spec"]["restartPolicy"] == {"retryableExitCodes": [1, 137]}
    assert "gpusPerPod" not in stored["spec"]  # no defaults stored: the model applies them

    # Unknown fields are kept, for the operator to name (SpecValid=False, InvalidSpec).
    typo = kube.post(trainingjob_path(namespace), _job("typo", gpusPerPode=4))
    assert typo["spec"]["gpusPerPode"] == 4

    for bad, field in [({"nodes": 0}, "nodes"), ({"gpusPerPod": 65}, "gpusPerPod"),
                       ({"launcher": "mpirun"}, "launcher"),
                       ({"memoryPerPod": "2 GB"}, "memoryPerPod"),
                       ({"restartPolicy": {"maxRestarts": -1}}, "maxRestarts"),
                       ({"checkpoint": {"volume": "ckpt"}}, "path")]:
        with pytest.raises(ApiError) as rejected:
            kube.post(trainingjob_path(namespace), _job("bad", **bad))
        assert rejected.value.status == 422, bad
        assert field in str(rejected.value.body), (bad, rejected.value.body)
