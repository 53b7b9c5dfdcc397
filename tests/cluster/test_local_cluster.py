"""The local control plane is a real Kubernetes: nodes, scheduling, kwok stages, teardown."""

from __future__ import annotations

import uuid
from collections.abc import Callable, Iterator
from typing import Any

import pytest
from kubernetes import client

from tests.conftest import LocalCluster
from trainmaster.kubeclient import generated_client
from trainmaster.polling import wait_until

pytestmark = pytest.mark.integration


@pytest.fixture()
def core(local_cluster: LocalCluster) -> client.CoreV1Api:
    return client.CoreV1Api(generated_client(local_cluster.kubeconfig))


@pytest.fixture()
def namespace(core: client.CoreV1Api) -> Iterator[str]:
    name = f"t-{uuid.uuid4().hex[:8]}"
    core.create_namespace({"metadata": {"name": name}})
    wait_for(lambda: _has_default_sa(core, name), "default service account", 30)
    yield name
    core.delete_namespace(name)


def _has_default_sa(core: client.CoreV1Api, ns: str) -> bool:
    return any(sa.metadata.name == "default"
               for sa in core.list_namespaced_service_account(ns).items)


def wait_for(check: Callable[[], Any], what: str, timeout: float = 30) -> Any:
    return wait_until(check, what, timeout, 0.2)


def _pod(name: str, gpus: int = 1, labels: dict[str, str] | None = None,
         annotations: dict[str, str] | None = None) -> dict[str, Any]:
    return {
        "metadata": {"name": name, "labels": labels or {}, "annotations": annotations or {}},
        "spec": {"containers": [{"name": "main", "image": "busybox:1.36", "resources": {
            "requests": {"nvidia.com/gpu": str(gpus)}, "limits": {"nvidia.com/gpu": str(gpus)}}}]},
    }


def test_all_bench_nodes_are_ready_with_topology(local_cluster: LocalCluster,
                                                 core: client.CoreV1Api) -> None:
    nodes = core.list_node(label_selector="type=kwok").items
    assert len(nodes) == 500
    ready = [n for n in nodes if any(c.type == "Ready" and c.status == "True"
                                     for c in n.status.conditions)]
    assert len(ready) == 500
    node = next(n for n in nodes if n.metadata.name == "node-499")
    assert node.metadata.labels["topology.trainmaster.io/spine"] == "spine-4"
    assert node.metadata.labels["topology.trainmaster.io/leaf"] == "leaf-24"
    assert node.status.allocatable["nvidia.com/gpu"] == "8"
    assert node.status.allocatable["rdma/rail7"] == "8"
    leaves = {n.metadata.labels["topology.trainmaster.io/leaf"] for n in nodes}
    assert len(leaves) == 25


def test_kube_scheduler_binds_and_kwok_runs_a_pod(core: client.CoreV1Api, namespace: str) -> None:
    core.create_namespaced_pod(namespace, _pod("hello", gpus=4))
    pod = wait_for(lambda: (p := core.read_namespaced_pod("hello", namespace)).status.phase
                   == "Running" and p, "pod Running")
    assert pod.spec.node_name.startswith("node-")
    assert any(c.type == "PodScheduled" and c.status == "True" for c in pod.status.conditions)


def test_kwok_chaos_stage_fails_a_pod(core: client.CoreV1Api, namespace: str) -> None:
    core.create_namespaced_pod(namespace, _pod(
        "doomed", labels={"pod-container-running-failed.stage.kwok.x-k8s.io": "true"},
        annotations={"pod-container-running-failed.stage.kwok.x-k8s.io/exit-code": "137",
                     "pod-container-running-failed.stage.kwok.x-k8s.io/delay": "100ms"}))
    pod = wait_for(lambda: (p := core.read_namespaced_pod("doomed", namespace)).status.phase
                   == "Failed" and p, "pod Failed")
    state = pod.status.container_statuses[0].state.terminated
    assert state.exit_code == 137


def test_labelled_pod_completes(core: client.CoreV1Api, namespace: str) -> None:
    core.create_namespaced_pod(namespace, _pod("done", labels={"trainmaster.io/simulate":
                                                                "complete"}))
    wait_for(lambda: core.read_namespaced_pod("done", namespace).status.phase == "Succeeded",
             "pod Succeeded")


def test_up_installs_multus_nad_crd_and_no_whereabouts_crds_without_real_nodes(
    local_cluster: LocalCluster, namespace: str
) -> None:
    """The NetworkAttachmentDefinition CRD is the Network Plumbing WG's, installed by `cluster
    up` (trainmaster renders no stand-in); whereabouts' CRDs come only with real nodes."""
    from trainmaster.api import STUB_ANNOTATION
    from trainmaster.kubeclient import SyncKube, crd_path
    from trainmaster.objects import NETWORK_ATTACHMENT_CRD

    with SyncKube.connect(local_cluster.kubeconfig) as kube:
        crd = kube.get(crd_path(NETWORK_ATTACHMENT_CRD))
        assert STUB_ANNOTATION not in (crd["metadata"].get("annotations") or {})
        assert crd["spec"]["names"]["shortNames"] == ["net-attach-def"]
        # whereabouts' CRDs only with real nodes. This session cluster is shared, and
        # tests/cluster/test_attachments.py installs them into it on purpose, so the
        # choice is checked where `cluster up` makes it, not by their absence here.
        from trainmaster.cluster._network_crds import crd_documents
        names = {d["metadata"]["name"] for d in crd_documents(real_nodes=False)}
        assert names == {NETWORK_ATTACHMENT_CRD}
        assert "ippools.whereabouts.cni.cncf.io" in {
            d["metadata"]["name"] for d in crd_documents(real_nodes=True)}
        nad = {"apiVersion": "k8s.cni.cncf.io/v1", "kind": "NetworkAttachmentDefinition",
               "metadata": {"name": "rail0", "namespace": namespace},
               "spec": {"config": '{"cniVersion": "0.3.1", "type": "macvlan"}'}}
        stored = kube.apply(nad)
        assert stored["spec"]["config"] == nad["spec"]["config"]
