"""Real nodes: kubelet + containerd + runc on this host, beside kwok's simulated nodes.

One cluster for the module (2 real nodes, 1 simulated): pods really run, a headless Service
resolves through the cluster DNS, pods reach the API server, and `cluster down` leaves no
process, mount, network namespace, link, NAT rule or cgroup behind (the last test).
"""

from __future__ import annotations

import os
import time
import uuid
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest
from kubernetes import client

from tests.helpers import small_spec_doc, write_spec
from trainmaster.cluster import _host
from trainmaster.cluster._node_images import BUSYBOX_IMAGE
from trainmaster.kubeclient import generated_client as sync_client
from trainmaster.polling import wait_until
from trainmaster.toolchain import CONTAINERD_VERSION, K8S_VERSION, tool_path

pytestmark = [pytest.mark.integration, pytest.mark.realnode]

REAL = ["node-000", "node-001"]  # the first two nodes of the spec
KWOK = "node-002"


@dataclass
class RealCluster:
    kubeconfig: Path
    state_dir: Path
    slot: int
    netns_before: set[int]
    sysctls_before: dict[str, str]
    dirs_before: dict[str, bool]


def _sysctls() -> dict[str, str]:
    return {k: Path(f"/proc/sys/{k}").read_text() for k in _host.KUBELET_SYSCTLS}


def _netns_inodes() -> set[int]:
    inodes = set()
    for entry in Path("/proc").iterdir():
        if entry.name.isdigit():
            try:
                inodes.add((entry / "ns" / "net").stat().st_ino)
            except OSError:
                continue
    return inodes


@pytest.fixture(scope="module")
def real_cluster(trainmaster_home: Path, tmp_path_factory: pytest.TempPathFactory
                 ) -> Iterator[RealCluster]:
    from trainmaster import cluster

    spec = write_spec(tmp_path_factory.mktemp("realnode") / "cluster.yaml",
                      small_spec_doc("realnode", leaves=1, nodes_per_leaf=3))
    before = _netns_inodes()
    sysctls = _sysctls()
    dirs = {str(d): d.exists() for d in _host.KUBELET_HOST_DIRS}
    result = cluster.up(spec, real_nodes=2)
    state_dir = Path(result.record.state_dir)
    assert result.record.net_slot is not None
    try:
        yield RealCluster(Path(result.record.kubeconfig), state_dir, result.record.net_slot,
                          before, sysctls, dirs)
    finally:
        if (state_dir / "cluster.json").exists():
            cluster.down_state_dir(state_dir)


@pytest.fixture()
def core(real_cluster: RealCluster) -> client.CoreV1Api:
    return client.CoreV1Api(sync_client(real_cluster.kubeconfig))


@pytest.fixture()
def namespace(core: client.CoreV1Api) -> Iterator[str]:
    name = f"rn-{uuid.uuid4().hex[:8]}"
    core.create_namespace({"metadata": {"name": name}})
    wait_for(lambda: any(sa.metadata.name == "default"
                         for sa in core.list_namespaced_service_account(name).items),
             "default service account", 30)
    yield name
    core.delete_namespace(name)


def wait_for(check: Callable[[], Any], what: str, timeout: float = 60) -> Any:
    return wait_until(check, what, timeout, 0.3)


def _pod(name: str, node: str, script: str, labels: dict[str, str] | None = None,
         restart: str = "Never") -> dict[str, Any]:
    return {
        "metadata": {"name": name, "labels": labels or {}},
        "spec": {
            "nodeName": node,
            "restartPolicy": restart,
            "terminationGracePeriodSeconds": 1,
            "containers": [{
                "name": "main", "image": BUSYBOX_IMAGE, "imagePullPolicy": "Never",
                "command": ["sh", "-c", script],
            }],
        },
    }


def _finished(core: client.CoreV1Api, ns: str, name: str) -> Any:
    pod = core.read_namespaced_pod(name, ns)
    return pod if pod.status.phase in ("Succeeded", "Failed") else None


def test_real_nodes_are_ready_with_spec_labels_and_resources(core: client.CoreV1Api) -> None:
    nodes = {n.metadata.name: n for n in core.list_node().items}
    assert set(nodes) == {*REAL, KWOK}
    for name in REAL:
        node = nodes[name]
        assert any(c.type == "Ready" and c.status == "True" for c in node.status.conditions)
        info = node.status.node_info
        assert info.kubelet_version == K8S_VERSION
        assert info.container_runtime_version == f"containerd://{CONTAINERD_VERSION.removeprefix('v')}"
        labels = node.metadata.labels
        assert labels["topology.trainmaster.io/spine"] == "spine-0"
        assert labels["topology.trainmaster.io/leaf"] == "leaf-0"
        assert labels["trainmaster.io/real-node"] == "true"
        assert labels["nvidia.com/gpu.present"] == "false"  # no GPU agents land here
        assert "type" not in labels  # kwok's marker
        assert "kwok.x-k8s.io/node" not in (node.metadata.annotations or {})
        assert node.status.allocatable["nvidia.com/gpu"] == "8"
        assert node.status.allocatable["rdma/rail0"] == "8"
        assert node.status.capacity["nvidia.com/gpu"] == "8"
        assert [(t.key, t.value, t.effect) for t in node.spec.taints or []] == [
            ("trainmaster.io/real-node", "true", "NoSchedule")]
    # The third node is still kwok's.
    assert nodes[KWOK].metadata.labels["type"] == "kwok"
    assert nodes[KWOK].status.node_info.kubelet_version == "fake"


def test_extended_resources_survive_kubelet_status_updates(core: client.CoreV1Api) -> None:
    # kubelet rewrites the Node status every few seconds; the patched capacity must stay.
    time.sleep(12)
    for name in REAL:
        node = core.read_node(name)
        assert node.status.allocatable["nvidia.com/gpu"] == "8"


def test_a_pod_really_runs_and_its_log_is_served(core: client.CoreV1Api, namespace: str) -> None:
    core.create_namespaced_pod(namespace, _pod(
        "hello", REAL[1], "echo hello from $(hostname); cat /proc/self/cgroup | head -3"))
    pod = wait_for(lambda: _finished(core, namespace, "hello"), "pod hello to finish", 90)
    assert pod.status.phase == "Succeeded"
    assert pod.status.pod_ip.startswith("10.244.")
    log = core.read_namespaced_pod_log("hello", namespace)  # apiserver -> kubelet, x509 auth
    assert "hello from hello" in log
    assert "-n1/kubepods/besteffort/pod" in log  # in node-001's kubelet's pod cgroups


def test_kube_scheduler_keeps_other_pods_off_real_nodes(
    core: client.CoreV1Api, namespace: str
) -> None:
    # Scheduled by the stock kube-scheduler (on by default): an ordinary pod goes to the
    # simulated node; one that selects and tolerates real nodes goes to one and really runs.
    plain = _pod("plain", "", "true")
    del plain["spec"]["nodeName"]
    wanted = _pod("wanted", "", "echo on a real node")
    del wanted["spec"]["nodeName"]
    wanted["spec"]["nodeSelector"] = {"trainmaster.io/real-node": "true"}
    wanted["spec"]["tolerations"] = [{"key": "trainmaster.io/real-node", "operator": "Exists",
                                      "effect": "NoSchedule"}]
    core.create_namespaced_pod(namespace, plain)
    core.create_namespaced_pod(namespace, wanted)
    pod = wait_for(lambda: _finished(core, namespace, "wanted"), "pod wanted to finish", 90)
    assert pod.status.phase == "Succeeded" and pod.spec.node_name in REAL
    assert "on a real node" in core.read_namespaced_pod_log("wanted", namespace)
    plain_pod = wait_for(lambda: (p := core.read_namespaced_pod("plain", namespace)).spec.node_name
                         and p, "pod plain scheduled", 60)
    assert plain_pod.spec.node_name == KWOK


def test_headless_service_resolves_from_a_pod_on_the_other_node(
    core: client.CoreV1Api, namespace: str
) -> None:
    core.create_namespaced_pod(namespace, _pod(
        "rank-0", REAL[0], "sleep 300", labels={"app": "gang"}, restart="Always"))
    core.create_namespaced_service(namespace, {
        "metadata": {"name": "gang"},
        "spec": {"clusterIP": "None", "selector": {"app": "gang"},
                 "ports": [{"name": "c", "port": 29500}]},
    })
    server = wait_for(lambda: (p := core.read_namespaced_pod("rank-0", namespace)).status.pod_ip
                      and p.status.phase == "Running" and p, "rank-0 running", 90)
    fqdn = f"gang.{namespace}.svc.cluster.local"
    core.create_namespaced_pod(namespace, _pod(
        "rank-1", REAL[1],
        f"for i in $(seq 60); do nslookup {fqdn} && exit 0; sleep 1; done; "
        "exit 1"))
    pod = wait_for(lambda: _finished(core, namespace, "rank-1"), "rank-1 to finish", 120)
    log = core.read_namespaced_pod_log("rank-1", namespace)
    assert pod.status.phase == "Succeeded", log
    assert server.status.pod_ip in log
    assert fqdn in log


def test_pods_reach_each_other_and_the_api_server(core: client.CoreV1Api, namespace: str) -> None:
    core.create_namespaced_pod(namespace, _pod(
        "listener", REAL[0], "mkdir /www && echo pong > /www/index.html && "
        "exec httpd -f -p 7000 -h /www"))
    listener = wait_for(lambda: (p := core.read_namespaced_pod("listener", namespace)).status.pod_ip
                        and p.status.phase == "Running" and p, "listener running", 90)
    core.create_namespaced_pod(namespace, _pod(
        "dialer", REAL[1],
        f"for i in $(seq 20); do wget -q -O - http://{listener.status.pod_ip}:7000/ && break;"
        " sleep 1; done; nc -w 3 $KUBERNETES_SERVICE_HOST $KUBERNETES_SERVICE_PORT -e true"
        " && echo api-ok"))
    pod = wait_for(lambda: _finished(core, namespace, "dialer"), "dialer to finish", 90)
    log = core.read_namespaced_pod_log("dialer", namespace)
    assert pod.status.phase == "Succeeded", log
    assert "pong" in log
    assert "api-ok" in log


def test_real_nodes_have_their_rails_and_whereabouts_crds(real_cluster: RealCluster) -> None:
    """Each real node has one interface per rail of the spec, cabled to that rail's bridge;
    the cluster serves whereabouts' CRDs beside Multus's NetworkAttachmentDefinition."""
    from trainmaster.cluster import _fabric
    from trainmaster.cluster._network_crds import WHEREABOUTS_CRDS
    from trainmaster.kubeclient import SyncKube, crd_path
    from trainmaster.objects import NETWORK_ATTACHMENT_CRD

    slot = real_cluster.slot
    for node in range(len(REAL)):
        for rail in range(2):  # small_spec_doc's two rails, no storage network
            link = _fabric.node_rail(slot, node, rail)
            assert Path(f"/sys/class/net/{link}/operstate").read_text().strip() == "up"
            assert Path(f"/sys/class/net/{link}b/master").resolve().name == \
                _fabric.rail_bridge(slot, rail)
    assert not Path(f"/sys/class/net/{_fabric.storage_bridge(slot)}").exists()
    with SyncKube.connect(real_cluster.kubeconfig) as kube:
        for name in (NETWORK_ATTACHMENT_CRD, *WHEREABOUTS_CRDS):
            assert kube.get(crd_path(name))["metadata"]["name"] == name


def _nads(namespace: str) -> tuple[list[dict[str, Any]], str]:
    """small_spec_doc's rendered NADs (two InfiniBand rails) in `namespace`, and the
    networks annotation a training pod of that spec carries."""
    from trainmaster.objects._networks import build_network_attachments, pod_network_annotation
    from trainmaster.spec import validate_data

    doc = small_spec_doc("realnode", leaves=1, nodes_per_leaf=3)
    doc["metadata"]["namespace"] = namespace
    spec = validate_data(doc, "test")
    return build_network_attachments(spec), pod_network_annotation(spec)


def _network_status(core: client.CoreV1Api, ns: str, name: str) -> list[dict[str, Any]]:
    import json

    annotations = core.read_namespaced_pod(name, ns).metadata.annotations or {}
    return list(json.loads(annotations.get("k8s.v1.cni.cncf.io/network-status", "[]")))


def test_multus_attaches_the_nads_a_pod_asks_for_and_they_carry_a_rail(
    real_cluster: RealCluster, core: client.CoreV1Api, namespace: str
) -> None:
    """Multus on each real node reads the pod's networks annotation, fetches the NADs from
    the API server and runs them: net1, net2 on the spec's two rails (macvlan on its node's
    rail interface, whereabouts addresses of the rails' subnets), listed in the
    network-status annotation it writes. A pod on the other node fetches a page from the
    first over rail 1, and the bytes go through both nodes' rail-1 interfaces. A pod that
    asks for no network gets the pod network only."""
    from ipaddress import ip_address, ip_network

    from trainmaster.cluster import _fabric
    from trainmaster.kubeclient import SyncKube

    slot = real_cluster.slot
    nads, annotation = _nads(namespace)
    with SyncKube.connect(real_cluster.kubeconfig) as kube:
        for nad in nads:
            kube.apply(nad)
    subnets = ["10.100.0.0/20", "10.100.16.0/20"]  # small_spec_doc's rails

    def attached(name: str, node: str, script: str) -> dict[str, Any]:
        pod = _pod(name, node, script)
        pod["metadata"]["annotations"] = {"k8s.v1.cni.cncf.io/networks": annotation}
        return pod

    core.create_namespaced_pod(namespace, attached(
        "rail-server", REAL[0], "ip -4 -o addr; mkdir /www && head -c 200000 /dev/zero > "
        "/www/blob && exec httpd -f -p 7100 -h /www"))
    server = wait_for(lambda: (p := core.read_namespaced_pod("rail-server", namespace))
                      .status.phase == "Running" and p, "rail-server running", 120)
    log = wait_for(lambda: "net2" in (text := core.read_namespaced_pod_log(
        "rail-server", namespace)) and text, "rail-server's addresses", 30)
    addresses = {line.split()[1]: line.split()[3].split("/")[0]
                 for line in log.splitlines() if " inet " in line}
    for ifname, subnet in zip(("net1", "net2"), subnets, strict=True):
        assert ip_address(addresses[ifname]) in ip_network(subnet), addresses
    assert addresses["eth0"] == server.status.pod_ip  # the pod network stays eth0
    # Multus wrote what it attached: the pod network (default) and each NAD, by name.
    status = _network_status(core, namespace, "rail-server")
    assert [(s.get("interface"), s.get("default", False)) for s in status] == [
        ("eth0", True), ("net1", False), ("net2", False)]
    assert [s["name"] for s in status[1:]] == [
        f"{namespace}/{nad['metadata']['name']}" for nad in nads]
    assert [s["ips"] for s in status[1:]] == [[addresses["net1"]], [addresses["net2"]]]

    def counter(link: str, which: str) -> int:
        return int(Path(f"/sys/class/net/{link}/statistics/{which}_bytes").read_text())

    sent = counter(_fabric.node_rail(slot, 0, 1), "tx")
    received = counter(_fabric.node_rail(slot, 1, 1), "rx")
    core.create_namespaced_pod(namespace, attached(
        "rail-client", REAL[1],
        "ip -4 -o addr; for i in $(seq 20); do "
        f"wget -q -O /tmp/blob http://{addresses['net2']}:7100/blob && break; sleep 1; done; "
        "wc -c < /tmp/blob"))
    pod = wait_for(lambda: _finished(core, namespace, "rail-client"), "rail-client", 120)
    out = core.read_namespaced_pod_log("rail-client", namespace)
    assert pod.status.phase == "Succeeded", out
    assert out.strip().endswith("200000")
    client_rail = [line.split()[3].split("/")[0] for line in out.splitlines()
                   if " net2 " in line and " inet " in line]
    assert client_rail and client_rail[0] != addresses["net2"]
    assert ip_address(client_rail[0]) in ip_network(subnets[1])
    # The page crossed rail 1: out of node 0's rail-1 interface, into node 1's.
    assert counter(_fabric.node_rail(slot, 0, 1), "tx") - sent >= 200000
    assert counter(_fabric.node_rail(slot, 1, 1), "rx") - received >= 200000

    # No annotation: the pod network only.
    core.create_namespaced_pod(namespace, _pod("plain", REAL[1], "ip -o link"))
    pod = wait_for(lambda: _finished(core, namespace, "plain"), "plain", 120)
    links = [line.split(":")[1].strip().split("@")[0]
             for line in core.read_namespaced_pod_log("plain", namespace).splitlines()]
    assert pod.status.phase == "Succeeded" and sorted(links) == ["eth0", "lo"], links
    assert [s.get("interface") for s in _network_status(core, namespace, "plain")] == ["eth0"]


def test_a_changed_nad_changes_what_the_next_pod_gets(
    real_cluster: RealCluster, core: client.CoreV1Api, namespace: str
) -> None:
    """The NADs in the API server are what runs: a rail NAD's range changed, the next pod
    gets an address of the new range on that rail (and its MTU)."""
    import json
    from ipaddress import ip_address, ip_network

    from trainmaster.kubeclient import SyncKube

    nads, annotation = _nads(namespace)
    config = json.loads(nads[0]["spec"]["config"])
    config["plugins"][0]["ipam"]["range"] = "10.150.8.0/24"
    config["plugins"][0]["mtu"] = 2044
    nads[0]["spec"]["config"] = json.dumps(config)
    with SyncKube.connect(real_cluster.kubeconfig) as kube:
        for nad in nads:
            kube.apply(nad)
    pod = _pod("changed", REAL[0], "ip -o addr show net1; ip -o link show net1")
    pod["metadata"]["annotations"] = {"k8s.v1.cni.cncf.io/networks": annotation}
    core.create_namespaced_pod(namespace, pod)
    done = wait_for(lambda: _finished(core, namespace, "changed"), "changed", 120)
    out = core.read_namespaced_pod_log("changed", namespace)
    assert done.status.phase == "Succeeded", out
    (address,) = [line.split()[3].split("/")[0] for line in out.splitlines()
                  if " inet " in line]
    assert ip_address(address) in ip_network("10.150.8.0/24")
    assert " mtu 2044 " in out


def test_import_image_loads_an_archive_into_every_real_node(
    real_cluster: RealCluster, tmp_path: Path
) -> None:
    from trainmaster import cluster
    from trainmaster.cluster._node_images import write_archive

    archive = tmp_path / "images.tar"
    write_archive(_host.require_host()["busybox"], archive)
    assert cluster.import_image(real_cluster.state_dir, archive) == REAL
    for index in range(len(REAL)):
        sock = _host.slot_run_dir(real_cluster.slot) / f"n{index}" / "containerd.sock"
        listing = _host.run([str(tool_path("ctr")), "--address", str(sock), "-n", "k8s.io",
                             "images", "ls", "-q"]).stdout.split()
        assert BUSYBOX_IMAGE in listing
    with pytest.raises(cluster.ClusterError, match="no image archive"):
        cluster.import_image(real_cluster.state_dir, tmp_path / "missing.tar")


def test_a_killed_cluster_is_reaped_leaving_no_process_mount_netns_link_or_rule(
    real_cluster: RealCluster, core: client.CoreV1Api, tmp_path: Path
) -> None:
    # A test session or `up` killed by SIGKILL leaves its kubelets' pods, shims, mounts and
    # many GB of unpacked images: the next `up` with real nodes reaps such a cluster with
    # the same teardown as `down` (CI once ran out of disk on a killed session's leftovers).
    import signal

    from trainmaster import cluster
    from trainmaster.cluster import _processes as procs
    from trainmaster.cluster._state import ClusterRecord

    state_dir, slot = real_cluster.state_dir, real_cluster.slot
    run_dir, data_dir = _host.slot_run_dir(slot), _host.slot_data_dir(slot)
    # Running pods on both nodes when `down` comes: containers, shims, netns, veths, mounts.
    core.create_namespace({"metadata": {"name": "leftovers"}})
    wait_for(lambda: any(sa.metadata.name == "default"
                         for sa in core.list_namespaced_service_account("leftovers").items),
             "default service account", 30)
    for node in REAL:
        core.create_namespaced_pod("leftovers", _pod(f"on-{node}", node, "sleep 600"))
    for node in REAL:
        wait_for(lambda node=node: core.read_namespaced_pod(f"on-{node}", "leftovers")
                 .status.phase == "Running", f"pod on {node} running", 90)
    pod_netns = set()
    for index in range(len(REAL)):
        for pid in _host.cgroup_pids(f"tm-s{slot}-n{index}"):
            try:
                pod_netns.add(os.stat(f"/proc/{pid}/ns/net").st_ino)
            except FileNotFoundError:  # a short-lived process of the node exited meanwhile
                continue
    pod_netns -= real_cluster.netns_before
    assert pod_netns, "the pods should run in network namespaces of their own"
    assert _host.mounts_under([run_dir, data_dir, state_dir / "nodes"])
    assert _host.pids_mentioning([str(run_dir) + "/"])  # the shims
    record = ClusterRecord.load(state_dir)
    assert record is not None
    for proc in record.processes:
        os.killpg(proc.pid, signal.SIGKILL)
    wait_until(lambda: not any(procs.alive(p.pid) for p in record.processes),
               "the killed processes gone", 10)

    assert cluster.reap_dead_clusters(tmp_path / "the-next-cluster") == [state_dir]

    assert _host.pids_mentioning([f"{d}/" for d in (state_dir, run_dir, data_dir)]) == []
    assert _host.mounts_under([run_dir, data_dir, state_dir]) == []
    assert _host.leftover_links(slot) == []
    from trainmaster.cluster import _fabric

    assert _fabric.links(slot) == []
    iptables = _host._which("iptables")
    assert iptables is not None
    assert _host.nat_rules(slot, iptables) == []
    for index in range(len(REAL)):
        assert _host.cgroup_dirs(f"tm-s{slot}-n{index}") == []
    assert not run_dir.exists() and not data_dir.exists()
    assert not state_dir.exists()
    assert not (_host.RUN_ROOT / "slots" / str(slot)).exists()
    # kubelet set kernel tunables host-wide and made its fixed folders; the last `down` put
    # the host back as it was.
    assert _sysctls() == real_cluster.sysctls_before
    for folder in _host.KUBELET_HOST_DIRS:
        assert folder.exists() == real_cluster.dirs_before[str(folder)]
    # A network namespace lives while a process or a bind mount holds it: none is left.
    assert not (pod_netns & _netns_inodes())
