"""A step's costs read from the real local control plane: the API server's own /metrics
as text, and the CPU of the cluster's processes from their /proc entries."""

from __future__ import annotations

import asyncio

import pytest

from tests.conftest import LocalCluster
from trainmaster.bench._step_costs import CostMeter, StepCosts, step_pids
from trainmaster.kubeclient import ApiError, Kube, api_path

pytestmark = pytest.mark.integration


def test_get_text_reads_the_api_servers_metrics_and_fails_as_api_error(
        local_cluster: LocalCluster) -> None:
    async def read() -> tuple[str, ApiError]:
        api = await Kube.connect(local_cluster.kubeconfig)
        async with api:
            text = await api.get_text("/metrics")
            with pytest.raises(ApiError) as missing:
                await api.get_text("/no-such-path")
            return text, missing.value

    text, missing = asyncio.run(read())
    assert "# TYPE apiserver_request_total counter" in text
    assert missing.status == 404


def test_a_step_counts_the_control_planes_cpu_and_its_own_requests(
        local_cluster: LocalCluster) -> None:
    async def step() -> StepCosts:
        api = await Kube.connect(local_cluster.kubeconfig)
        async with api:
            meter = CostMeter(api, step_pids(local_cluster.kubeconfig, {}))
            await meter.start()
            for _ in range(20):
                await api.get(api_path("v1", "namespaces"))
            meter.act_done()
            await asyncio.sleep(1.0)  # the kwok nodes' heartbeats go on meanwhile
            return await meter.finish([])

    costs = asyncio.run(step())
    assert {"etcd", "kube-apiserver", "kwok", "kube-controller-manager"} \
        <= set(costs.cpu_seconds)
    assert costs.cpu_seconds["kube-apiserver"] > 0
    assert set(costs.cpu_seconds_in_act) == set(costs.cpu_seconds)
    assert 0 < costs.act_seconds <= costs.window_seconds
    assert costs.api_requests.get("LIST namespaces", 0) >= 20, costs.api_requests
    assert costs.pods_deleted == 0 and costs.pods_deleted_per_second == 0.0
