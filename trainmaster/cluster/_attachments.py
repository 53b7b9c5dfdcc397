"""What a real node has for the NADs' CNI configurations to run on: its CNI plugin folder.

Multus (_multus) fetches each NAD a pod asks for from the API server and runs the CNI
configuration it holds, as it is, with the node's plugin folder. A NAD names the device it
attaches to the way every node of a real cluster calls it (`ib0`..`ib3` for an InfiniBand
rail, the RoCE netdev, the storage NIC's `interface`); on a real cluster each node has its own
devices of those names. Here every real node lives in the host's one network namespace,
where a name exists once, so node i's devices are its interfaces of the stand-in fabric
(`tm<s>n<i>r<k>`, `tm<s>n<i>st`, _fabric). Each node's plugin folder therefore holds, under
the names the NADs use (`macvlan`, `ipoib`), a small program that maps the device name to
the node's own interface, runs IP over InfiniBand as macvlan (this host has no IB HCA, so the
`ipoib` plugin could not run), names the node's whereabouts configuration file (what
whereabouts' DaemonSet installs on each node), and runs the real macvlan plugin with the rest
of the NAD's configuration unchanged: its name, MTU, mode and IPAM range come from the API
server, so changing a NAD changes what the next pod gets.
"""

from __future__ import annotations

import json
import os
import sys
from pathlib import Path

from trainmaster.cluster import _fabric
from trainmaster.objects import rail_devices
from trainmaster.spec import ClusterSpec
from trainmaster.toolchain import tool_path

# Plugins the node's folder links to as they are (the pod network, IPAM, Multus).
_LINKED = ("bridge", "host-local", "loopback", "portmap", "whereabouts", "multus")
# The plugin types a rendered NAD names that the node maps onto macvlan (_DEVICE_PLUGIN).
MAPPED_TYPES = ("macvlan", "ipoib")

_DEVICE_PLUGIN = '''#!{python}
"""{node}'s devices for the NADs' CNI configurations (trainmaster/cluster/_attachments.py):
maps the device a NAD names to this node's interface and runs the real macvlan plugin."""
import json, subprocess, sys
DEVICES = {devices}
MACVLAN = {macvlan!r}
WHEREABOUTS_CONF = {whereabouts!r}
data = sys.stdin.buffer.read()
conf = json.loads(data) if data.strip() else None
if isinstance(conf, dict):
    conf["master"] = DEVICES.get(conf.get("master"), conf.get("master"))
    if conf.get("type") == "ipoib":  # no IB HCA here: IP over the rail's Ethernet stand-in
        conf["type"] = "macvlan"
        conf.setdefault("mode", "bridge")
    ipam = conf.get("ipam")
    if isinstance(ipam, dict) and ipam.get("type") == "whereabouts":
        ipam.setdefault("configuration_path", WHEREABOUTS_CONF)
    data = json.dumps(conf).encode()
sys.exit(subprocess.run([MACVLAN], input=data).returncode)
'''


def device_map(spec: ClusterSpec, slot: int, node: int) -> dict[str, str]:
    """The device names the rendered NADs use -> this node's interface of that network."""
    compute = spec.networks.compute
    devices: dict[str, str] = {}
    for index, device in enumerate(rail_devices(spec)):
        ours = _fabric.node_rail(slot, node, index)
        devices[device] = ours
        if compute.fabric == "infiniband":
            devices[f"ib{index}"] = ours  # the IPoIB NADs name the port's netdev
    if spec.networks.storage is not None:
        devices[spec.networks.storage.interface] = _fabric.node_storage(slot, node)
    return devices


def install_plugins(bin_dir: Path, *, node: str, devices: dict[str, str],
                    whereabouts_conf: Path) -> None:
    """Fill the node's CNI plugin folder: links to the built plugins, and the device-mapping
    program under each plugin type the NADs name."""
    bin_dir.mkdir(parents=True, exist_ok=True)
    for name in _LINKED:
        link = bin_dir / name
        link.unlink(missing_ok=True)
        link.symlink_to(tool_path(name))
    program = _DEVICE_PLUGIN.format(
        python=sys.executable, node=node, devices=json.dumps(devices, sort_keys=True),
        macvlan=str(tool_path("macvlan")), whereabouts=str(whereabouts_conf))
    for name in MAPPED_TYPES:
        path = bin_dir / name
        path.write_text(program)
        os.chmod(path, 0o755)
