"""What a real node has for the NADs' CNI configurations to run on (_attachments): the
device names the rendered NADs use map to the node's own interfaces of the stand-in fabric,
and the node's plugin program hands the real macvlan the NAD's configuration with only the
device, the IPoIB type and whereabouts' node-local configuration file changed."""

from __future__ import annotations

import json
import subprocess
from pathlib import Path

import pytest

from tests.helpers import small_spec_doc, stack_doc
from trainmaster.cluster import _attachments, _fabric
from trainmaster.objects._networks import build_network_attachments
from trainmaster.spec import validate_data


def test_the_dev_stacks_devices_map_to_the_nodes_interfaces() -> None:
    spec = validate_data(stack_doc("dev"), "test")  # 4 InfiniBand rails and storage
    devices = _attachments.device_map(spec, 3, 1)
    masters = [json.loads(n["spec"]["config"])["plugins"][0]["master"]
               for n in build_network_attachments(spec)]
    assert [devices[m] for m in masters] == [
        *(_fabric.node_rail(3, 1, r) for r in range(4)), _fabric.node_storage(3, 1)]


def test_the_node_program_runs_macvlan_with_the_nads_config(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    # The real macvlan's place taken by a program that prints what it was given.
    echo = tmp_path / "macvlan-echo"
    echo.write_text("#!/bin/sh\ncat\n")
    echo.chmod(0o755)
    monkeypatch.setattr(_attachments, "tool_path", lambda name: echo)
    spec = validate_data(small_spec_doc("nn", leaves=1, nodes_per_leaf=2), "test")
    flat = Path("/state/whereabouts/whereabouts.conf")
    bin_dir = tmp_path / "bin"
    _attachments.install_plugins(bin_dir, node="node-001", whereabouts_conf=flat,
                                 devices=_attachments.device_map(spec, 2, 1))
    assert sorted(p.name for p in bin_dir.iterdir()) == sorted(
        ["bridge", "host-local", "loopback", "portmap", "whereabouts", "multus", "macvlan",
         "ipoib"])
    for index, nad in enumerate(build_network_attachments(spec)):
        (plugin,) = json.loads(nad["spec"]["config"])["plugins"]
        conf = {"cniVersion": "0.3.1", "name": nad["metadata"]["name"], **plugin}
        out = subprocess.run([str(bin_dir / plugin["type"])], input=json.dumps(conf),
                             capture_output=True, text=True, check=True)
        ran = json.loads(out.stdout)
        assert ran["type"] == "macvlan" and ran["master"] == _fabric.node_rail(2, 1, index)
        assert ran["mtu"] == plugin["mtu"] and ran["name"] == conf["name"]
        assert ran["ipam"] == {**plugin["ipam"], "configuration_path": str(flat)}
    # A device the node does not have is passed on as named: macvlan then says so.
    out = subprocess.run([str(bin_dir / "macvlan")], input='{"type": "macvlan", '
                         '"master": "eth9"}', capture_output=True, text=True, check=True)
    assert json.loads(out.stdout)["master"] == "eth9"


def test_containerd_runs_multus_only_from_the_nodes_plugin_folder(tmp_path: Path) -> None:
    """The node's CNI folder holds one configuration, Multus's thin plugin with the pod
    network as its delegate; containerd's attach-everything settings are gone."""
    from trainmaster.cluster import _multus
    from trainmaster.cluster._real_nodes import _cni_config, _containerd_config, layouts

    (node,) = layouts(tmp_path / "state", 2, ["node-001"])
    toml = _containerd_config(node, "/usr/sbin/runc")
    assert "max_conf_num" not in toml and "setup_serially" not in toml
    assert f'bin_dirs = ["{node.dir / "cni" / "bin"}"]' in toml
    conf = _multus.node_config(kubeconfig=tmp_path / "multus.kubeconfig",
                               bin_dir=node.dir / "cni" / "bin", node_dir=node.dir,
                               pod_network=_cni_config(node))
    assert conf["type"] == "multus"
    assert conf["delegates"] == [_cni_config(node)]
    assert conf["kubeconfig"] == str(tmp_path / "multus.kubeconfig")
    assert conf["binDir"] == str(node.dir / "cni" / "bin")
