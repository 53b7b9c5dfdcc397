"""The real nodes' stand-in fabric: pods on two nodes meet over a rail's bridge and only there.

Built as `cluster up --real-nodes` builds it (one bridge per rail and one for storage, a veth
from each node's interface to each bridge), then the real macvlan CNI plugin attaches network
namespaces to the nodes' rail interfaces as it attaches pods: two on the same rail (one per
node) reach each other, and the rail interfaces' byte counters show it; one on the other
rail, even with an address of the first rail's subnet, is out of reach. Removing the fabric
leaves no link. Needs root; holds /tmp/realnode.lock (run with flock, see docs).
"""

from __future__ import annotations

import json
import os
import subprocess
import time
import uuid
from pathlib import Path

import pytest

from tests.helpers import small_spec_doc
from trainmaster.cluster import _fabric, _host
from trainmaster.spec import validate_data
from trainmaster.toolchain import tool_path

pytestmark = [pytest.mark.realnode]


def _attach(ns: str, master: str, network: str, subnet: str, ipam_dir: Path, mtu: int,
            ifname: str = "net1") -> str:
    """ADD a macvlan on `master` into netns `ns` as `ifname`, as containerd would; its
    address."""
    config = {
        "cniVersion": "1.0.0", "name": network, "type": "macvlan", "master": master,
        "mode": "bridge", "mtu": mtu,
        "ipam": {"type": "host-local", "ranges": [[{"subnet": subnet}]],
                 "dataDir": str(ipam_dir)},
    }
    env = {
        "PATH": os.environ["PATH"], "CNI_COMMAND": "ADD", "CNI_CONTAINERID": ns,
        "CNI_NETNS": f"/var/run/netns/{ns}", "CNI_IFNAME": ifname,
        "CNI_PATH": str(tool_path("macvlan").parent),
    }
    proc = subprocess.run([str(tool_path("macvlan"))], input=json.dumps(config), env=env,
                          capture_output=True, text=True, timeout=30)
    assert proc.returncode == 0, proc.stdout + proc.stderr
    (address,) = json.loads(proc.stdout)["ips"]
    return str(address["address"]).split("/")[0]


def _bytes(link: str, which: str) -> int:
    return int(Path(f"/sys/class/net/{link}/statistics/{which}_bytes").read_text())


def _ping(ns: str, address: str) -> subprocess.CompletedProcess[str]:
    busybox = _host.require_host()["busybox"]  # the host may have no ping of its own
    return subprocess.run(["ip", "netns", "exec", ns, busybox, "ping", "-c", "3", "-W", "1",
                           address], capture_output=True, text=True, timeout=30)


def test_nodes_meet_on_a_rail_only_through_its_bridge(
    slot: int, netns: list[str], tmp_path: Path
) -> None:
    doc = small_spec_doc("fabric", leaves=1, nodes_per_leaf=2)
    doc["networks"]["storage"] = {"subnet": "10.200.0.0/20"}
    spec = validate_data(doc, "test")
    plan = _fabric.plan(spec)
    assert len(plan.rail_mtus) == len(spec.networks.compute.rails) == 2
    made = _fabric.create(slot, 2, plan)
    rail = [[_fabric.node_rail(slot, n, r) for r in range(2)] for n in range(2)]
    assert made[:4] == [rail[0][0], rail[1][0], rail[0][1], rail[1][1]]
    storage = spec.networks.storage
    assert storage is not None
    assert made[4:] == [_fabric.node_storage(slot, n) for n in range(2)]
    for n in range(2):
        for r in range(2):
            link = rail[n][r]
            assert Path(f"/sys/class/net/{link}/mtu").read_text().strip() == str(
                spec.networks.compute.mtu)
            assert Path(f"/sys/class/net/{link}/operstate").read_text().strip() == "up"
            # The node's interface is cabled to its rail's bridge, no other.
            port = Path(f"/sys/class/net/{link}b/master").resolve().name
            assert port == _fabric.rail_bridge(slot, r)
    assert Path(f"/sys/class/net/{_fabric.node_storage(slot, 0)}/mtu").read_text().strip() == str(
        storage.mtu)

    names = [f"tmt{uuid.uuid4().hex[:6]}" for _ in range(3)]
    for name in names:
        _host.run(["ip", "netns", "add", name])
        netns.append(name)
    subnet = spec.networks.compute.rails[0].subnet
    mtu = spec.networks.compute.mtu
    ipam = tmp_path / "ipam"
    a = _attach(names[0], rail[0][0], "rail0", subnet, ipam, mtu)
    b = _attach(names[1], rail[1][0], "rail0", subnet, ipam, mtu)
    # On node 1's other rail, with an address of rail 0's subnet: only a bridge between
    # the rails could carry a packet to it, and there is none.
    c = _attach(names[2], rail[1][1], "rail0", subnet, ipam, mtu)
    assert len({a, b, c}) == 3

    sent = _bytes(rail[0][0], "tx")
    received = _bytes(rail[1][0], "rx")
    same_rail = _ping(names[0], b)
    assert same_rail.returncode == 0, same_rail.stdout + same_rail.stderr
    # 3 echo requests of 84 bytes' IP packet each went out of node 0's rail-0 interface and
    # into node 1's: the bytes crossed the rail's bridge.
    assert _bytes(rail[0][0], "tx") - sent >= 3 * 98
    assert _bytes(rail[1][0], "rx") - received >= 3 * 98
    other_rail = _ping(names[0], c)
    assert other_rail.returncode != 0, other_rail.stdout

    _fabric.delete(slot)
    assert _fabric.links(slot) == []
    # The namespaces' macvlans went with the node interfaces they sat on.
    for name in names:
        out = _host.run(["ip", "netns", "exec", name, "ip", "-o", "link", "show"]).stdout
        assert "net1" not in out


def test_fabric_links_are_told_apart_from_other_slots_and_the_pod_bridges() -> None:
    assert _fabric.is_fabric_link(1, "tm1r0")
    assert _fabric.is_fabric_link(1, "tm1st")
    assert _fabric.is_fabric_link(1, "tm1n3r12b")
    assert _fabric.is_fabric_link(1, "tm1n0st")
    assert not _fabric.is_fabric_link(1, "tm1n0")  # the node's pod bridge
    assert not _fabric.is_fabric_link(1, "tm10r0")  # slot 10's
    assert not _fabric.is_fabric_link(1, "tm10n0r0")
    assert max(len(_fabric.node_rail(15, 15, 31) + "b"), len(_fabric.node_storage(15, 15))) <= 15


def test_the_nic_agent_sees_a_rail_interface_go_down_and_come_back(slot: int) -> None:
    """The NIC agent's judgement on the real /sys of a node's rail interfaces: healthy, then
    PortDown naming the interface once `ip link set … down` cuts it, DeviceMissing for a rail
    the node lacks, and a flap (carrier lost and back between two looks) once it is up again."""
    from trainmaster.nodeagent import judge_ports, read_netdevs

    doc = small_spec_doc("fabricnic", leaves=1, nodes_per_leaf=2)
    _fabric.create(slot, 2, _fabric.plan(validate_data(doc, "test")))
    rails = [_fabric.node_rail(slot, 0, r) for r in range(2)]

    ports = read_netdevs(rails)
    assert [p.device for p in ports] == sorted(rails)
    verdict = judge_ports(ports, rails)
    assert (verdict.healthy, verdict.reason) == (True, "PortsActive"), verdict.message
    before = {p.name: dict(p.counters) for p in ports}

    _host.run(["ip", "link", "set", rails[1], "down"])
    verdict = judge_ports(read_netdevs(rails), rails, before)
    assert (verdict.healthy, verdict.reason) == (False, "PortDown")
    assert f"{rails[1]}/1 DOWN" in verdict.message and rails[0] not in verdict.message

    missing = judge_ports(read_netdevs([*rails, "tm99n0r7"]), [*rails, "tm99n0r7"])
    assert (missing.healthy, missing.reason) == (False, "DeviceMissing")

    # The cable's other end (the bridge's port) going down drops the carrier too.
    _host.run(["ip", "link", "set", rails[1], "up"])
    _host.run(["ip", "link", "set", rails[0] + "b", "down"])
    verdict = judge_ports(read_netdevs(rails), rails, before)
    assert (verdict.healthy, verdict.reason) == (False, "PortDown")
    assert rails[0] in verdict.message and "NoCarrier" in verdict.message
    _host.run(["ip", "link", "set", rails[0] + "b", "up"])
    for _ in range(50):  # carrier comes back asynchronously
        if all(p.up for p in read_netdevs(rails)):
            break
        time.sleep(0.1)
    verdict = judge_ports(read_netdevs(rails), rails, before)
    assert (verdict.healthy, verdict.reason) == (False, "LinkFlapped"), verdict.message
    after = {p.name: dict(p.counters) for p in read_netdevs(rails)}
    assert judge_ports(read_netdevs(rails), rails, after).healthy


def test_the_examples_all_reduce_runs_over_the_rail_the_launcher_picks(
    slot: int, netns: list[str], tmp_path: Path
) -> None:
    """Two ranks of the data-parallel example under `trainmaster launch`, each in a netns on
    its own node: they bootstrap over rail 0 (standing in for the pod network here) and the
    launcher, finding the pod's rail by its address in TRAINMASTER_RAIL_SUBNETS, points the
    all-reduce at rail 1; rail 1's node interfaces carry the gradients, rail 0's little."""
    import sys

    from tests.helpers import ROOT

    doc = small_spec_doc("fabrictrain", leaves=1, nodes_per_leaf=2)
    spec = validate_data(doc, "test")
    _fabric.create(slot, 2, _fabric.plan(spec))
    subnets = [r.subnet for r in spec.networks.compute.rails]
    mtu = spec.networks.compute.mtu
    names = [f"tmt{uuid.uuid4().hex[:6]}" for _ in range(2)]
    addrs: list[list[str]] = []
    for node, name in enumerate(names):
        _host.run(["ip", "netns", "add", name])
        netns.append(name)
        _host.run(["ip", "netns", "exec", name, "ip", "link", "set", "lo", "up"])
        got = []
        for rail in range(2):
            got.append(_attach(name, _fabric.node_rail(slot, node, rail), f"rail{rail}",
                               subnets[rail], tmp_path / f"ipam{rail}", mtu,
                               ifname=f"net{rail + 1}"))
        addrs.append(got)

    def counters(rail: int) -> int:
        return sum(_bytes(_fabric.node_rail(slot, n, rail), d) for n in range(2)
                   for d in ("tx", "rx"))

    before = [counters(0), counters(1)]
    procs = []
    for rank, name in enumerate(names):
        env = {"PATH": os.environ["PATH"], "HOME": str(tmp_path), "RANK": str(rank),
               "WORLD_SIZE": "2", "MASTER_ADDR": addrs[0][0], "MASTER_PORT": "29555",
               "TRAINMASTER_RAIL_SUBNETS": subnets[1], "TM_HP_TRAIN_STEPS": "200",
               "TM_HP_CHECKPOINT_EVERY": "1000"}
        procs.append(subprocess.Popen(
            ["ip", "netns", "exec", name, sys.executable, "-m", "trainmaster", "launch", "--",
             sys.executable, str(ROOT / "examples" / "data-parallel" / "train.py")],
            env=env, cwd=ROOT, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True))
    logs = [p.communicate(timeout=300)[0] for p in procs]
    for proc, log in zip(procs, logs, strict=True):
        assert proc.returncode == 0, log
    assert "collectives over the rails: GLOO_SOCKET_IFNAME=net2" in logs[1]
    assert f"all-reduce via {addrs[0][1]}" in logs[0] and f"all-reduce via {addrs[0][1]}" in \
        logs[1]
    rail0, rail1 = counters(0) - before[0], counters(1) - before[1]
    # 200 steps, each a 64-float gradient up and the sum down (520 bytes apiece), counted
    # once leaving one node's interface and once entering the other's.
    assert rail1 >= 200 * 2 * 520 * 2, (rail0, rail1)
    assert rail0 < rail1 / 10, (rail0, rail1)
