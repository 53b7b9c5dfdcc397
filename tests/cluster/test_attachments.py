"""The rendered NADs run on real nodes' plugin folders: macvlan on the node's rail,
whereabouts IPAM.

Against the real control plane (whereabouts keeps its allocations there, as the whereabouts
ServiceAccount with the RBAC it publishes), network namespaces on two nodes of the stand-in
fabric are attached with the rendered NADs' configurations, run as Multus runs them: the
plugin its `type` names in the node's plugin folder (_attachments), which runs the real
macvlan and whereabouts plugins: each gets an address of the spec's rail subnet, no
two the same, the IPPool records who holds which, they talk over the rail, and DEL gives the
address back. Needs root; holds /tmp/realnode.lock (run with flock).
"""

from __future__ import annotations

import json
import os
import subprocess
import uuid
from ipaddress import ip_address, ip_network
from pathlib import Path
from typing import Any

import pytest

from tests.conftest import LocalCluster
from tests.helpers import small_spec_doc
from trainmaster.cluster import _attachments, _fabric, _host, _network_crds, _whereabouts
from trainmaster.kubeclient import SyncKube
from trainmaster.objects._networks import build_network_attachments
from trainmaster.spec import ClusterSpec, validate_data

pytestmark = [pytest.mark.integration, pytest.mark.realnode]


def _spec() -> ClusterSpec:
    doc = small_spec_doc(f"att{uuid.uuid4().hex[:4]}", leaves=1, nodes_per_leaf=2)
    doc["networks"]["storage"] = {"subnet": "10.200.0.0/20"}
    return validate_data(doc, "test")


def _cni(command: str, bin_dir: Path, conf: dict[str, Any], ns: str,
         ifname: str) -> dict[str, Any]:
    """Run a NAD's configuration for a pod `ns` as Multus does: the plugin of its type in
    the node's plugin folder, which is also the CNI_PATH."""
    env = {
        "PATH": os.environ["PATH"], "CNI_COMMAND": command, "CNI_CONTAINERID": ns,
        "CNI_NETNS": f"/var/run/netns/{ns}", "CNI_IFNAME": ifname, "CNI_PATH": str(bin_dir),
        "CNI_ARGS": f"IgnoreUnknown=1;K8S_POD_NAMESPACE=default;K8S_POD_NAME={ns}",
    }
    proc = subprocess.run([str(bin_dir / conf["type"])], input=json.dumps(conf), env=env,
                          capture_output=True, text=True, timeout=60)
    assert proc.returncode == 0, proc.stdout + proc.stderr
    return json.loads(proc.stdout) if proc.stdout.strip() else {}


def _nad_configs(spec: ClusterSpec) -> list[dict[str, Any]]:
    """Each rendered NAD's configuration as Multus hands it to the plugin."""
    out = []
    for nad in build_network_attachments(spec):
        config = json.loads(nad["spec"]["config"])
        (plugin,) = config["plugins"]
        out.append({"cniVersion": config["cniVersion"], "name": config["name"], **plugin})
    return out


def _allocations(kube: SyncKube) -> dict[str, str]:
    """IPPools in kube-system: address offset -> podRef, over every pool."""
    pools = kube.get("/apis/whereabouts.cni.cncf.io/v1alpha1/namespaces/kube-system/ippools")
    return {
        f"{pool['spec']['range']}+{offset}": alloc["podref"]
        for pool in pools["items"]
        for offset, alloc in (pool["spec"].get("allocations") or {}).items()
    }


def test_rails_get_whereabouts_addresses_of_the_spec_subnets_and_carry_traffic(
    local_cluster: LocalCluster, slot: int, netns: list[str], tmp_path: Path
) -> None:
    spec = _spec()
    _network_crds.install(local_cluster.kubeconfig, real_nodes=True)
    flat = _whereabouts.install(local_cluster.kubeconfig, tmp_path / "whereabouts")
    _fabric.create(slot, 2, _fabric.plan(spec))
    bins = [tmp_path / f"bin{n}" for n in range(2)]
    for n, bin_dir in enumerate(bins):
        _attachments.install_plugins(bin_dir, node=f"n{n}", whereabouts_conf=flat,
                                     devices=_attachments.device_map(spec, slot, n))
    configs = _nad_configs(spec)  # rails first, storage last
    ifnames = ["net1", "net2", "storage0"]

    pods = [f"tmt{uuid.uuid4().hex[:6]}" for _ in range(2)]
    addresses: list[list[str]] = []
    for node, pod in enumerate(pods):
        _host.run(["ip", "netns", "add", pod])
        netns.append(pod)
        got = []
        for conf, ifname in zip(configs, ifnames, strict=True):
            result = _cni("ADD", bins[node], conf, pod, ifname)
            (ip,) = result["ips"]
            got.append(str(ip["address"]).split("/")[0])
        addresses.append(got)
    subnets = [r.subnet for r in spec.networks.compute.rails]
    assert spec.networks.storage is not None
    subnets.append(spec.networks.storage.subnet)
    for got in addresses:
        for address, subnet in zip(got, subnets, strict=True):
            assert ip_address(address) in ip_network(subnet)
    assert addresses[0] != addresses[1]

    with SyncKube.connect(local_cluster.kubeconfig) as kube:
        held = _allocations(kube)
        assert sorted(v for v in held.values() if v.split("/")[1] in pods) == sorted(
            f"default/{p}" for p in pods for _ in subnets)

        busybox = _host.require_host()["busybox"]
        sent = int(Path(f"/sys/class/net/{_fabric.node_rail(slot, 0, 1)}/statistics/tx_bytes")
                   .read_text())
        ping = subprocess.run(["ip", "netns", "exec", pods[0], busybox, "ping", "-c", "2",
                               "-W", "2", "-I", "net2", addresses[1][1]],
                              capture_output=True, text=True, timeout=30)
        assert ping.returncode == 0, ping.stdout + ping.stderr
        assert int(Path(f"/sys/class/net/{_fabric.node_rail(slot, 0, 1)}/statistics/tx_bytes")
                   .read_text()) - sent >= 2 * 98

        for conf, ifname in zip(configs, ifnames, strict=True):
            _cni("DEL", bins[0], conf, pods[0], ifname)
        left = _allocations(kube)
        assert not [v for v in left.values() if v == f"default/{pods[0]}"]
        assert [v for v in left.values() if v == f"default/{pods[1]}"]
        for conf, ifname in zip(configs, ifnames, strict=True):
            _cni("DEL", bins[1], conf, pods[1], ifname)
