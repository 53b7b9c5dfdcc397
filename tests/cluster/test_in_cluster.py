"""trainmaster-scheduler and the operator run in-cluster, as pods on a real node, under their
own generated ServiceAccounts (issue 11).

One cluster from stacks/dev with one real node: the image is built (cached by its inputs)
and imported into the node's containerd, the dev stack's objects are applied with
`spec.system` placing the two controllers on the real node, and then:

- both Deployments' pods run and stay Ready on the real node with no restart;
- the in-cluster scheduler binds a gang (PodGroup + pods) with its ServiceAccount's rights
  only: a verb missing from its generated RBAC fails the bind, and this test with it.
"""

from __future__ import annotations

import time
import uuid
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest
import yaml
from kubernetes import client

from tests.cluster.diagnose import describe_namespace
from trainmaster.kubeclient import generated_client as sync_client
from trainmaster.polling import WaitTimeout, wait_until
from trainmaster.spec import load_spec

pytestmark = [pytest.mark.integration, pytest.mark.realnode, pytest.mark.image]

ROOT = Path(__file__).resolve().parents[2]
REAL_LABEL = "trainmaster.io/real-node"
PODGROUPS = ("scheduling.x-k8s.io", "v1alpha1", "podgroups")


@dataclass
class InCluster:
    kubeconfig: Path
    namespace: str
    system: str
    scheduler: str
    operator: str
    real_node: str


def wait_for(check: Callable[[], Any], what: str, timeout: float = 60) -> Any:
    return wait_until(check, what, timeout, 0.5)


def _dev_spec_on_real_node(path: Path) -> Path:
    """stacks/dev as is, plus `system`: the controllers select and tolerate real nodes."""
    doc = yaml.safe_load((ROOT / "stacks" / "dev" / "cluster.yaml").read_text())
    doc["system"] = {
        "nodeSelector": {REAL_LABEL: "true"},
        "tolerations": [{"key": REAL_LABEL, "operator": "Exists", "effect": "NoSchedule"}],
    }
    path.write_text(yaml.safe_dump(doc, sort_keys=False))
    return path


@pytest.fixture(scope="module")
def in_cluster(trainmaster_home: Path, tmp_path_factory: pytest.TempPathFactory
               ) -> Iterator[InCluster]:
    from trainmaster import cluster
    from trainmaster.apply import apply_spec
    from trainmaster.image import build_image

    spec_path = _dev_spec_on_real_node(tmp_path_factory.mktemp("incluster") / "cluster.yaml")
    spec = load_spec(spec_path)
    image = build_image(ROOT, spec.image.reference)  # cached by its inputs
    result = cluster.up(spec_path, real_nodes=1)
    state_dir = Path(result.record.state_dir)
    try:
        real_node = spec.nodes[0].name  # --real-nodes N makes the spec's first N real
        assert cluster.import_image(state_dir, image.archive) == [real_node]
        kubeconfig = Path(result.record.kubeconfig)
        apply_spec(kubeconfig, spec)
        yield InCluster(kubeconfig, spec.metadata.namespace, f"{spec.metadata.namespace}-system",
                        spec.scheduler.name, f"{spec.metadata.name}-operator", real_node)
    finally:
        cluster.down_state_dir(state_dir)


@pytest.fixture()
def core(in_cluster: InCluster) -> client.CoreV1Api:
    return client.CoreV1Api(sync_client(in_cluster.kubeconfig))


def _deployment_pods(core: client.CoreV1Api, ns: str, deployment: str) -> list[Any]:
    """The Deployment's pods, once there are as many as its replicas (else empty)."""
    apps = client.AppsV1Api(core.api_client)
    dep = apps.read_namespaced_deployment(deployment, ns)
    selector = dep.spec.selector.match_labels
    pods = core.list_namespaced_pod(
        ns, label_selector=",".join(f"{k}={v}" for k, v in selector.items())).items
    return list(pods) if len(pods) == dep.spec.replicas else []


def _ready(pod: Any) -> bool:
    return bool(pod.status.phase == "Running" and any(
        c.type == "Ready" and c.status == "True" for c in pod.status.conditions or []))


def _ready_check(core: client.CoreV1Api, ns: str, deployment: str) -> Callable[[], bool]:
    def check() -> bool:
        pods = _deployment_pods(core, ns, deployment)
        return bool(pods) and all(_ready(p) for p in pods)
    return check


def test_controllers_run_as_pods_on_the_real_node_and_stay_up(
    in_cluster: InCluster, core: client.CoreV1Api
) -> None:
    ns = in_cluster.system
    for deployment, account in ((in_cluster.scheduler, in_cluster.scheduler),
                                (in_cluster.operator, in_cluster.operator)):
        try:
            wait_for(_ready_check(core, ns, deployment), f"{deployment} Running and Ready", 180)
        except WaitTimeout as exc:
            raise AssertionError(f"{exc}\n{describe_namespace(core, ns)}") from None
        for pod in _deployment_pods(core, ns, deployment):
            assert pod.spec.node_name == in_cluster.real_node
            assert pod.spec.service_account_name == account
            assert pod.status.pod_ip.startswith("10.244.")
    time.sleep(20)  # a controller that cannot reach or may not read the API crashes by now
    for deployment in (in_cluster.scheduler, in_cluster.operator):
        pods = _deployment_pods(core, ns, deployment)
        assert pods and all(_ready(p) for p in pods), describe_namespace(core, ns)
        for pod in pods:
            restarts = [s.restart_count for s in pod.status.container_statuses]
            assert restarts == [0], describe_namespace(core, ns)


def test_in_cluster_scheduler_binds_a_gang(in_cluster: InCluster, core: client.CoreV1Api
                                           ) -> None:
    ns = in_cluster.namespace
    custom = client.CustomObjectsApi(core.api_client)
    group = f"gang-{uuid.uuid4().hex[:6]}"
    custom.create_namespaced_custom_object(*PODGROUPS[:2], ns, PODGROUPS[2], {
        "apiVersion": "scheduling.x-k8s.io/v1alpha1", "kind": "PodGroup",
        "metadata": {"name": group}, "spec": {"minMember": 2},
    })
    names = [f"{group}-{i}" for i in range(2)]
    for name in names:  # simulated nodes only: these pods do not tolerate the real node
        core.create_namespaced_pod(ns, {
            "metadata": {"name": name, "labels": {"scheduling.x-k8s.io/pod-group": group}},
            "spec": {
                "schedulerName": in_cluster.scheduler,
                "terminationGracePeriodSeconds": 0,
                "containers": [{"name": "c", "image": "busybox:1.36", "resources": {
                    "requests": {"nvidia.com/gpu": "1"}, "limits": {"nvidia.com/gpu": "1"}}}],
            },
        })

    def bound() -> dict[str, str] | None:
        pods = {n: core.read_namespaced_pod(n, ns) for n in names}
        nodes = {n: p.spec.node_name for n, p in pods.items()}
        return nodes if all(nodes.values()) else None

    try:
        nodes = wait_for(bound, f"gang {group} bound by the in-cluster scheduler", 90)
    except WaitTimeout as exc:
        raise AssertionError(
            f"{exc}\n{describe_namespace(core, ns)}\n"
            f"{describe_namespace(core, in_cluster.system)}") from None
    assert in_cluster.real_node not in nodes.values()
    for name in names:
        pod = core.read_namespaced_pod(name, ns)
        conditions = {c.type: c.status for c in pod.status.conditions}
        assert conditions["PodScheduled"] == "True"

    scheduler_pods = {p.metadata.name for p in
                      _deployment_pods(core, in_cluster.system, in_cluster.scheduler)}

    def scheduled_event() -> Any:
        events = core.list_namespaced_event(
            ns, field_selector=f"involvedObject.name={group},reason=Scheduled").items
        return events[0] if events else None

    event = wait_for(scheduled_event, f"a Scheduled event on PodGroup {group}", 30)
    assert event.involved_object.kind == "PodGroup"
    assert event.source.component == in_cluster.scheduler == "trainmaster-scheduler"
    # Who bound it: the leader among the in-cluster Deployment's pods (`<pod name>_<pid>`),
    # no host process.
    assert (event.reporting_instance or "").rsplit("_", 1)[0] in scheduler_pods, (
        event.reporting_instance, scheduler_pods)
