"""The CNI networks a real node's containerd attaches its pods to, derived from the rendered
NADs: the NAD's name, MTU and whereabouts range as rendered; macvlan on the node's own
interface of that rail (or of storage); file names that keep the pod network first."""

from __future__ import annotations

import json
from pathlib import Path

from tests.helpers import stack_doc
from trainmaster.cluster import _attachments, _fabric
from trainmaster.objects._networks import build_network_attachments
from trainmaster.spec import validate_data


def test_every_rendered_nad_becomes_a_macvlan_on_the_nodes_interface() -> None:
    spec = validate_data(stack_doc("dev"), "test")  # 4 InfiniBand rails and storage
    flat = Path("/state/whereabouts/whereabouts.conf")
    networks = _attachments.node_networks(spec, 3, 1, flat)
    nads = build_network_attachments(spec)
    assert len(networks) == len(nads) == 5
    files = [f for f, _ in networks]
    assert files == sorted(files) and files[0] > _attachments.POD_NETWORK_FILE
    for (filename, conflist), nad in zip(networks, nads, strict=True):
        rendered = json.loads(nad["spec"]["config"])
        (plugin,) = conflist["plugins"]
        assert conflist["name"] == rendered["name"] == nad["metadata"]["name"]
        assert filename == f"{filename[:2]}-{rendered['name']}.conflist"
        assert plugin["type"] == "macvlan" and plugin["mode"] == "bridge"
        assert plugin["mtu"] == rendered["plugins"][0]["mtu"]
        assert plugin["ipam"] == {**rendered["plugins"][0]["ipam"],
                                  "configuration_path": str(flat)}
    masters = [c["plugins"][0]["master"] for _, c in networks]
    assert masters == [*(_fabric.node_rail(3, 1, r) for r in range(4)),
                       _fabric.node_storage(3, 1)]
    assert [c["plugins"][0]["ipam"]["range"] for _, c in networks] == [
        *(r.subnet for r in spec.networks.compute.rails), "10.200.0.0/20"]
    assert _attachments.interface_names(spec) == {
        "dev-rail0": "eth1", "dev-rail1": "eth2", "dev-rail2": "eth3", "dev-rail3": "eth4",
        "dev-storage": "eth5"}
