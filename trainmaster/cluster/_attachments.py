"""The rendered NetworkAttachmentDefinitions, realized on one real node as CNI networks.

Multus would read a pod's `k8s.v1.cni.cncf.io/networks` annotation, fetch the named NADs and
run each one's CNI config on the node. Multus cannot be built here (the Go module proxy refuses
every version of it, docs/real-nodes.md), so each real node's containerd attaches its pods to
the same networks itself: containerd's CRI plugin sets up the first `max_conf_num` networks of
its CNI folder for every pod, in file-name order, as eth0 (the pod network), eth1... So
every pod on a real node, not only the gang's, gets every rail and the storage network; the
interfaces are eth1.. (Multus would name them net1.., as the annotation asks), and nothing
writes `k8s.v1.cni.cncf.io/network-status`.

Each NAD's config is taken as rendered (name, MTU, whereabouts range from the spec's subnet);
two things change per node, as they must on one shared host: the plugin is macvlan (what a
RoCE rail uses; the rendered InfiniBand NADs name ipoib, which needs an IB HCA) and its master
is the node's own interface on that rail or on storage (_fabric), since every node's
interfaces live in the one host namespace under names of their own.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

from trainmaster.cluster import _fabric
from trainmaster.objects import build_network_attachments
from trainmaster.spec import ClusterSpec

POD_NETWORK_FILE = "10-trainmaster.conflist"


def node_networks(
    spec: ClusterSpec, slot: int, node: int, whereabouts_conf: Path
) -> list[tuple[str, dict[str, Any]]]:
    """(file name, conflist) per rendered NAD, rails first and storage last, as they are
    rendered; file names sort after the pod network's so the pod network stays eth0."""
    rails = len(spec.networks.compute.rails)
    out = []
    for index, nad in enumerate(build_network_attachments(spec)):
        config = json.loads(nad["spec"]["config"])
        (plugin,) = config["plugins"]
        master = (_fabric.node_rail(slot, node, index) if index < rails
                  else _fabric.node_storage(slot, node))
        realized = {
            "type": "macvlan",
            "master": master,
            "mode": "bridge",
            "mtu": plugin["mtu"],
            "ipam": {**plugin["ipam"], "configuration_path": str(whereabouts_conf)},
        }
        name = str(config["name"])
        out.append((f"{20 + index:02d}-{name}.conflist",
                    {"cniVersion": config["cniVersion"], "name": name, "plugins": [realized]}))
    return out


def interface_names(spec: ClusterSpec) -> dict[str, str]:
    """NAD name -> the interface a pod on a real node has for it (containerd's eth<i>)."""
    return {
        str(nad["metadata"]["name"]): f"eth{i + 1}"
        for i, nad in enumerate(build_network_attachments(spec))
    }
