"""The NIC agent's /metrics (served by a real HTTP server on loopback and scraped), what it
judges on a node without RDMA devices (its annotation's interfaces), and how the
DaemonSet is rendered to be scraped."""

from __future__ import annotations

import urllib.request
from collections.abc import Iterator
from pathlib import Path

import pytest
from prometheus_client.parser import text_string_to_metric_families

from tests.helpers import STACKS
from trainmaster.api import NIC_NETDEVS_ANNOTATION, REAL_NODE_LABEL
from trainmaster.drill import placed_on_real_nodes
from trainmaster.nodeagent import NicAgent, NicAgentConfig, NicMetrics, annotated_netdevs
from trainmaster.objects import all_objects
from trainmaster.objects._nodeagent import NIC_AGENT_METRICS_PORT
from trainmaster.spec import load_spec, validate_data

from .test_nic import make_port


def make_netdev(root: Path, name: str, operstate: str = "up", carrier: str = "1",
                downs: int = 0) -> None:
    folder = root / "class" / "net" / name
    folder.mkdir(parents=True, exist_ok=True)
    (folder / "operstate").write_text(operstate + "\n")
    (folder / "carrier").write_text(carrier + "\n")
    (folder / "carrier_down_count").write_text(f"{downs}\n")


Samples = dict[tuple[str, tuple[tuple[str, str], ...]], float]


def scrape(port: int) -> Samples:
    with urllib.request.urlopen(f"http://127.0.0.1:{port}/metrics", timeout=5) as resp:
        text = resp.read().decode()
    return {(s.name, tuple(sorted(s.labels.items()))): s.value
            for family in text_string_to_metric_families(text) for s in family.samples}


@pytest.fixture
def served() -> Iterator[tuple[NicMetrics, int]]:
    metrics = NicMetrics("node-a")
    port = metrics.serve("127.0.0.1", 0)
    try:
        yield metrics, port
    finally:
        metrics.stop()


def test_the_metrics_report_what_the_agent_saw(tmp_path: Path,
                                               served: tuple[NicMetrics, int]) -> None:
    metrics, port = served
    make_port(tmp_path, "mlx5_0", counters={"link_downed": 2})
    make_port(tmp_path, "mlx5_1")
    agent = NicAgent(NicAgentConfig(node="node-a", sysfs=tmp_path,
                                    devices=("mlx5_0", "mlx5_1")),
                     kube=None, metrics=metrics)  # type: ignore[arg-type]
    assert agent.look().healthy
    got = scrape(port)
    node = ("node", "node-a")
    assert got[("trainmaster_nic_healthy", (node, ("reason", "PortsActive")))] == 1
    assert got[("trainmaster_nic_ports", (node,))] == 2
    assert got[("trainmaster_nic_port_up", (("device", "mlx5_1"), node, ("port", "1")))] == 1
    assert got[("trainmaster_nic_port_link_downed",
                (("device", "mlx5_0"), node, ("port", "1")))] == 2
    assert got[("trainmaster_nic_last_look_timestamp_seconds", (node,))] > 0

    make_port(tmp_path, "mlx5_1", state="1: DOWN", phys="3: Disabled")
    assert agent.look().reason == "PortDown"
    got = scrape(port)
    assert got[("trainmaster_nic_healthy", (node, ("reason", "PortDown")))] == 0
    # One series per node: the old reason is gone, so `trainmaster_nic_healthy == 0` is
    # not hidden by a stale 1.
    assert ("trainmaster_nic_healthy", (node, ("reason", "PortsActive"))) not in got
    assert got[("trainmaster_nic_port_up", (("device", "mlx5_1"), node, ("port", "1")))] == 0


def test_no_rdma_device_serves_zero_ports_and_unhealthy(tmp_path: Path,
                                                        served: tuple[NicMetrics, int]) -> None:
    metrics, port = served
    agent = NicAgent(NicAgentConfig(node="node-a", sysfs=tmp_path, devices=("mlx5_0",)),
                     kube=None, metrics=metrics)  # type: ignore[arg-type]
    assert agent.look().reason == "DeviceMissing"
    got = scrape(port)
    assert got[("trainmaster_nic_ports", (("node", "node-a"),))] == 0
    assert got[("trainmaster_nic_healthy",
                (("node", "node-a"), ("reason", "DeviceMissing")))] == 0
    assert not [k for k in got if k[0] == "trainmaster_nic_port_up"]


def test_a_node_without_rdma_devices_is_judged_by_its_annotated_interfaces(
        tmp_path: Path) -> None:
    make_netdev(tmp_path, "tm0n0r0")
    make_netdev(tmp_path, "tm0n0r1")
    node = {"metadata": {"annotations": {NIC_NETDEVS_ANNOTATION: "tm0n0r0, tm0n0r1"}}}
    annotated = annotated_netdevs(node)
    assert annotated == ("tm0n0r0", "tm0n0r1")
    agent = NicAgent(NicAgentConfig(node="n", sysfs=tmp_path, devices=("mlx5_0", "mlx5_1")),
                     kube=None)  # type: ignore[arg-type]
    verdict = agent.look(annotated)
    assert (verdict.healthy, verdict.reason) == (True, "PortsActive")
    make_netdev(tmp_path, "tm0n0r1", operstate="down", carrier="0")
    assert agent.look(annotated).reason == "PortDown"
    # Without the annotation the same node has nothing to show: DeviceMissing, as before.
    assert agent.look().reason == "DeviceMissing"
    assert annotated_netdevs({"metadata": {}}) == ()


def test_rdma_devices_win_over_the_annotation(tmp_path: Path) -> None:
    make_port(tmp_path, "mlx5_0", state="1: DOWN", phys="3: Disabled")
    make_netdev(tmp_path, "tm0n0r0")
    agent = NicAgent(NicAgentConfig(node="n", sysfs=tmp_path, devices=("mlx5_0",)),
                     kube=None)  # type: ignore[arg-type]
    assert agent.look(("tm0n0r0",)).reason == "PortDown"


def test_the_daemonset_serves_metrics_on_its_pod_ip_and_is_scraped() -> None:
    spec = load_spec(STACKS / "dev" / "cluster.yaml")
    objs = all_objects(spec)
    name = f"{spec.metadata.name}-nic-agent"
    (ds,) = [o for o in objs if o["kind"] == "DaemonSet" and o["metadata"]["name"] == name]
    pod = ds["spec"]["template"]["spec"]
    (container,) = pod["containers"]
    assert container["command"][-4:] == ["--metrics-address", "$(POD_IP)", "--metrics-port",
                                         str(NIC_AGENT_METRICS_PORT)]
    assert {"name": "metrics", "containerPort": NIC_AGENT_METRICS_PORT, "protocol": "TCP"} in \
        container["ports"]
    assert any(e["name"] == "POD_IP" for e in container["env"])
    assert pod["nodeSelector"] == {"nvidia.com/gpu.present": "true"}
    (svc,) = [o for o in objs if o["kind"] == "Service" and o["metadata"]["name"] ==
              f"{name}-metrics"]
    assert svc["spec"]["selector"] == ds["spec"]["selector"]["matchLabels"]
    (monitor,) = [o for o in objs if o["kind"] == "ServiceMonitor"
                  and o["metadata"]["name"] == name]
    assert monitor["spec"]["selector"]["matchLabels"].items() <= \
        svc["metadata"]["labels"].items()
    assert monitor["metadata"]["labels"]["app.kubernetes.io/part-of"] == "trainmaster"
    (policy,) = [o for o in objs if o["kind"] == "NetworkPolicy"
                 and o["metadata"]["name"] == f"{name}-metrics"]
    assert policy["spec"]["ingress"][0]["ports"] == [{"port": NIC_AGENT_METRICS_PORT}]


def test_the_demo_places_the_nic_agent_on_the_real_nodes() -> None:
    import yaml

    doc = yaml.safe_load((STACKS / "dev" / "cluster.yaml").read_text())
    placed, _ = placed_on_real_nodes(doc, "trainmaster.local/trainmaster:0.1.0")
    spec = validate_data(placed, "placed")
    assert spec.monitoring.nic_agent.node_selector == {REAL_NODE_LABEL: "true"}
    (ds,) = [o for o in all_objects(spec) if o["kind"] == "DaemonSet"
             and o["metadata"]["name"].endswith("-nic-agent")]
    assert ds["spec"]["template"]["spec"]["nodeSelector"] == {REAL_NODE_LABEL: "true"}
    # It tolerates the real nodes' taint (and every other).
    assert ds["spec"]["template"]["spec"]["tolerations"] == [{"operator": "Exists"}]
