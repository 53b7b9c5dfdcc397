"""Real nodes beside the simulated ones: containerd + runc + kubelet per node, CoreDNS once.

Over 500 lines on purpose: the folders, configs, start and teardown of a real node share
one layout (``NodeLayout``, below); keeping them together keeps teardown exact.

Every real node lives on this host with its own folders, socket, cgroup root and bridge:

    <state>/nodes/<name>/            configs (containerd, kubelet, CNI: Multus's thin plugin and
                                     the node's plugin folder), IPAM and Multus state
    /var/lib/trainmaster/s<slot>/n<i>/  kubelet root, containerd root, pod logs (short paths:
                                     kubelet makes unix sockets deep inside its root)
    /run/trainmaster/s<slot>/n<i>/   containerd state and socket
    /sys/fs/cgroup/*/tm-s<slot>-n<i> the kubelet's cgroup root (its pods' cgroups)
    bridge tm<slot>n<i>              10.244.<slot*16+i>.1/24: the pods' gateway (node 0's is every
                                     real node's InternalIP: node_ip)

CoreDNS runs as a host process on node 0's bridge address and serves cluster.local from the
API server, so a headless Service's names resolve in pods as on any cluster. Pods reach the API
server through the `kubernetes` Service address (see _host.add_apiserver_nat).
"""

from __future__ import annotations

import contextlib
import json
import shutil
import time
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import yaml

from trainmaster.api import GPU_RESOURCE, NIC_NETDEVS_ANNOTATION, RDMA_PREFIX, REAL_NODE_LABEL
from trainmaster.cluster import (
    _attachments,
    _fabric,
    _host,
    _kube_router,
    _multus,
    _storage_host,
    _whereabouts,
)
from trainmaster.cluster._node_images import SANDBOX_IMAGE, write_archive
from trainmaster.cluster._processes import ClusterError, free_port, log_tail
from trainmaster.objects import build_node
from trainmaster.spec import ClusterSpec, ResolvedNode
from trainmaster.toolchain import NODE_FAMILIES, RECIPES, ToolchainError, is_built, tool_path

Launch = Callable[[str, list[str], list[int]], tuple[Any, Path]]
Report = Callable[[str], None]

CLUSTER_DOMAIN = "cluster.local"
# Real nodes run only pods that ask for them: an image that exists only in a registry (a GPU
# exporter's, say) would never start there, and `pulumi up` would wait on it. Pods meant for
# real nodes select the label and tolerate this taint.
REAL_NODE_TAINT = {"key": REAL_NODE_LABEL, "value": "true", "effect": "NoSchedule"}


def require_tools() -> None:
    missing = [f for f in NODE_FAMILIES if not is_built(f)]
    if missing:
        names = ", ".join(f"{f} {RECIPES[f].version}" for f in missing)
        raise ToolchainError(
            f"--real-nodes needs tools not built yet: {names}; run `trainmaster tools build "
            f"{' '.join(missing)}`"
        )


@dataclass(frozen=True)
class NodeLayout:
    name: str
    index: int
    slot: int
    dir: Path
    run_dir: Path
    data_dir: Path

    @property
    def net(self) -> _host.NodeNet:
        return _host.node_net(self.slot, self.index)

    @property
    def socket(self) -> Path:
        return self.run_dir / "containerd.sock"

    @property
    def cgroup_root(self) -> str:
        return f"tm-s{self.slot}-n{self.index}"

    @property
    def cni_network(self) -> str:
        return f"trainmaster-s{self.slot}n{self.index}"

    def rail(self, rail: int) -> str:
        """The node's interface on a rail of the stand-in fabric (its HCA's netdev)."""
        return _fabric.node_rail(self.slot, self.index, rail)

    @property
    def storage(self) -> str:
        """The node's interface on the storage network (its storage NIC)."""
        return _fabric.node_storage(self.slot, self.index)


def layouts(state_dir: Path, slot: int, names: list[str]) -> list[NodeLayout]:
    return [
        NodeLayout(
            n, i, slot, state_dir / "nodes" / n,
            _host.slot_run_dir(slot) / f"n{i}", _host.slot_data_dir(slot) / f"n{i}",
        )
        for i, n in enumerate(names)
    ]


def dns_ip(slot: int) -> str:
    return _host.node_net(slot, 0).gateway


def node_ip(slot: int) -> str:
    """Every real node's InternalIP: the first node's bridge address. They share this host's
    network namespace, and kube-router, which enforces for the pods whose hostIP is its
    Node's, then covers them all (_kube_router); each kubelet listens there on its own port."""
    return _host.node_net(slot, 0).gateway


# --- configuration files -------------------------------------------------------------------


def _containerd_config(node: NodeLayout, runc: str) -> str:
    cni = node.dir / "cni"
    return f"""version = 3
root = "{node.data_dir / 'containerd'}"
state = "{node.run_dir / 'state'}"
# Plugins a CRI node does not use here (and which would want host-global folders).
disabled_plugins = ["io.containerd.nri.v1.nri", "io.containerd.snapshotter.v1.blockfile",
                    "io.containerd.snapshotter.v1.erofs", "io.containerd.tracing.processor.v1.otlp",
                    "io.containerd.internal.v1.tracing"]

[grpc]
  address = "{node.socket}"

[ttrpc]
  address = "{node.run_dir / 'containerd.sock.ttrpc'}"

[debug]
  address = ""

[metrics]
  address = ""

[plugins.'io.containerd.internal.v1.opt']
  path = "{node.dir / 'opt'}"

[plugins.'io.containerd.cri.v1.images']
  snapshotter = "overlayfs"
  [plugins.'io.containerd.cri.v1.images'.pinned_images]
    sandbox = "{SANDBOX_IMAGE}"

[plugins.'io.containerd.cri.v1.runtime']
  netns_mounts_under_state_dir = true
  # This host refuses a lower oom_score_adj than the caller's (runc: "failed to update
  # /proc/self/oom_score_adj: Permission denied" for the sandbox's -998): clamp to ours.
  restrict_oom_score_adj = true
  enable_unprivileged_ports = true
  enable_unprivileged_icmp = true
  cdi_spec_dirs = []
  [plugins.'io.containerd.cri.v1.runtime'.containerd]
    default_runtime_name = "runc"
    [plugins.'io.containerd.cri.v1.runtime'.containerd.runtimes.runc]
      runtime_type = "io.containerd.runc.v2"
      [plugins.'io.containerd.cri.v1.runtime'.containerd.runtimes.runc.options]
        BinaryName = "{runc}"
        Root = "{node.run_dir / 'runc'}"
        SystemdCgroup = false
  [plugins.'io.containerd.cri.v1.runtime'.cni]
    # The node's plugin folder (_attachments) and its one configuration, Multus (_multus).
    bin_dirs = ["{cni / 'bin'}"]
    conf_dir = "{cni / 'net.d'}"

[plugins.'io.containerd.grpc.v1.cri']
  stream_server_address = "127.0.0.1"
  stream_server_port = "0"
"""


def _cni_config(node: NodeLayout) -> dict[str, Any]:
    net = node.net
    return {
        "cniVersion": "1.0.0",
        "name": node.cni_network,
        "plugins": [
            {
                "type": "bridge",
                "bridge": net.bridge,
                # The bridge and its address are made by `cluster up`: with isGateway the
                # plugin would switch on the host's global ip_forward, which we leave alone.
                "isGateway": False,
                "ipMasq": False,
                "hairpinMode": True,
                "ipam": {
                    "type": "host-local",
                    "ranges": [[{"subnet": str(net.subnet), "gateway": net.gateway}]],
                    "routes": [{"dst": "0.0.0.0/0"}],
                    "dataDir": str(node.dir / "cni" / "ipam"),
                },
            }
        ],
    }


def _kubelet_config(
    node: NodeLayout, pki: Path, port: int, healthz: int, dns: str
) -> dict[str, Any]:
    return {
        "apiVersion": "kubelet.config.k8s.io/v1beta1",
        "kind": "KubeletConfiguration",
        # This host mounts cgroup v1; kubelet >= 1.35 refuses it unless told (KEP-5573).
        "failCgroupV1": False,
        "cgroupDriver": "cgroupfs",
        "cgroupRoot": f"/{node.cgroup_root}",
        "containerRuntimeEndpoint": f"unix://{node.socket}",
        "address": node_ip(node.slot),
        "port": port,
        "readOnlyPort": 0,
        "healthzBindAddress": "127.0.0.1",
        "healthzPort": healthz,
        "authentication": {
            "anonymous": {"enabled": False},
            "webhook": {"enabled": True},
            "x509": {"clientCAFile": str(pki / "ca.crt")},
        },
        "authorization": {"mode": "Webhook"},
        "clusterDNS": [dns],
        "clusterDomain": CLUSTER_DOMAIN,
        "resolvConf": str(node.dir / "resolv.conf"),
        "podLogsDir": str(node.data_dir / "pod-logs"),
        "volumePluginDir": str(node.dir / "volume-plugins"),
        "failSwapOn": False,
        "maxPods": 40,
        "serializeImagePulls": False,
        # Images are imported, never pulled: never collect them, whatever the host's disk.
        "imageGCHighThresholdPercent": 100,
        "imageGCLowThresholdPercent": 99,
        "evictionHard": {
            "memory.available": "100Mi",
            "nodefs.available": "1%",
            "imagefs.available": "1%",
            "nodefs.inodesFree": "1%",
        },
        "nodeStatusUpdateFrequency": "5s",
        "nodeStatusReportFrequency": "1m",
        "syncFrequency": "10s",
        "shutdownGracePeriod": "0s",
        "shutdownGracePeriodCriticalPods": "0s",
    }


def _corefile(dns: str, kubeconfig: Path, ready_port: int) -> str:
    return f"""{CLUSTER_DOMAIN}:53 in-addr.arpa:53 {{
    bind {dns}
    errors
    ready 127.0.0.1:{ready_port}
    kubernetes {CLUSTER_DOMAIN} in-addr.arpa {{
        kubeconfig {kubeconfig}
        pods insecure
    }}
    cache 5
}}
"""


def _write(path: Path, text: str) -> Path:
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(text)
    return path


# --- start ---------------------------------------------------------------------------------


def prepare_network(slot: int, nodes: list[NodeLayout], spec: ClusterSpec) -> None:
    """Each node's pod bridge, and the fabric: the rails' and storage's bridges with each
    node's interface on them (_fabric)."""
    for node in nodes:
        _host.create_bridge(node.net)
    _fabric.create(slot, len(nodes), _fabric.plan(spec))
    if spec.networks.storage is not None:  # the S3 server's address (_storage_host)
        _storage_host.attach(slot, spec.networks.storage.subnet)


def _ready_http(port: int) -> bool:
    import urllib.request

    with urllib.request.urlopen(f"http://127.0.0.1:{port}/ready", timeout=2) as resp:
        return bool(resp.status == 200)


def import_archive(node: NodeLayout, archive: Path) -> None:
    """Load an OCI or docker archive into the node's containerd, where kubelet's CRI finds it
    (namespace k8s.io); pods use it with imagePullPolicy Never or IfNotPresent.

    The compressed layers are discarded once unpacked, as containerd's CRI
    `discard_unpacked_layers` does for pulls: nothing here reads them again, and the torch
    image's 3.2 GB of gzip per node beside its 5.6 GB of unpacked files filled CI's disk."""
    ctr = [str(tool_path("ctr")), "--address", str(node.socket)]
    _host.run([*ctr, "-n", "k8s.io", "images", "import", "--platform", "linux/amd64",
               "--local", "--discard-unpacked-layers", str(archive)])


def import_image(state_dir: Path, slot: int, names: list[str], archive: Path) -> list[str]:
    """Load an image archive into every real node of a cluster; return the node names."""
    if not archive.is_file():
        raise ClusterError(f"no image archive at {archive}")
    for node in layouts(state_dir, slot, names):
        import_archive(node, archive)
    return names


def _answers(ctr: list[str]) -> Callable[[], bool]:
    return lambda: _host.run([*ctr, "version"], check=False).returncode == 0


def start(
    *,
    spec: ClusterSpec,
    nodes: list[NodeLayout],
    state_dir: Path,
    kubeconfig: Path,
    node_kubeconfigs: dict[str, Path],
    apiserver_port: int,
    launch: Launch,
    report: Report,
) -> None:
    """Start CoreDNS, then containerd and kubelet for each node; wait until every node is
    Ready with its spec labels and extended resources."""
    from trainmaster.cluster._processes import wait_until

    host = _host.require_host()
    slot = nodes[0].slot
    pki = state_dir / "pki"
    dns = dns_ip(slot)

    _host.save_host_state()
    _host.ensure_device_checkpoint()
    report("installing whereabouts' identity (ServiceAccount, RBAC, token)")
    whereabouts_conf = _whereabouts.install(kubeconfig, state_dir / "whereabouts")
    report("installing Multus's identity (ServiceAccount, RBAC, token)")
    multus_kubeconfig = _multus.install(kubeconfig, state_dir / "multus")
    report("starting CoreDNS")
    ready_port = free_port()
    corefile = _write(state_dir / "dns" / "Corefile", _corefile(dns, kubeconfig, ready_port))
    proc, log = launch(
        "coredns", [str(tool_path("coredns")), "-conf", str(corefile), "-dns.port", "53"],
        [ready_port],
    )
    wait_until(lambda: _ready_http(ready_port), "coredns", 60, proc, log)

    archive = state_dir / "images" / "node-images.tar"
    write_archive(host["busybox"], archive)
    resources = {n.name: n for n in spec.nodes}
    for node in nodes:
        report(f"starting containerd and kubelet of {node.name}")
        for sub in ("cni/net.d", "cni/ipam", "volume-plugins", "multus/cache", "multus/net.d"):
            (node.dir / sub).mkdir(parents=True, exist_ok=True)
        for sub in ("kubelet", "pod-logs", "containerd"):
            (node.data_dir / sub).mkdir(parents=True, exist_ok=True)
        node.run_dir.mkdir(parents=True, exist_ok=True)
        bin_dir = node.dir / "cni" / "bin"
        _attachments.install_plugins(
            bin_dir, node=node.name, whereabouts_conf=whereabouts_conf,
            devices=_attachments.device_map(spec, slot, node.index))
        multus = _multus.node_config(kubeconfig=multus_kubeconfig, bin_dir=bin_dir,
                                     node_dir=node.dir, pod_network=_cni_config(node))
        _write(node.dir / "cni" / "net.d" / _multus.CONF_FILE, json.dumps(multus, indent=2))
        config = _write(node.dir / "containerd.toml", _containerd_config(node, host["runc"]))
        proc, log = launch(
            f"containerd-{node.name}",
            [str(tool_path("containerd")), "--config", str(config), "--log-level", "warn"],
            [],
        )
        ctr = [str(tool_path("ctr")), "--address", str(node.socket)]
        wait_until(_answers(ctr), f"containerd of {node.name}", 60, proc, log)
        import_archive(node, archive)
        _write(node.dir / "resolv.conf", f"nameserver {dns}\n")
        port, healthz = free_port(), free_port()
        kcfg = _write(
            node.dir / "kubelet.yaml",
            yaml.safe_dump(_kubelet_config(node, pki, port, healthz, dns), sort_keys=False),
        )
        _host.create_cgroup(node.cgroup_root)
        labels = _spec_labels(spec, resources[node.name])
        launch(
            f"kubelet-{node.name}",
            [
                str(tool_path("kubelet")),
                f"--config={kcfg}",
                f"--kubeconfig={node_kubeconfigs[node.name]}",
                f"--root-dir={node.data_dir / 'kubelet'}",
                f"--cert-dir={node.data_dir / 'kubelet' / 'pki'}",
                f"--hostname-override={node.name}",
                f"--node-ip={node_ip(node.slot)}",
                "--node-labels=" + ",".join(f"{k}={v}" for k, v in sorted(labels.items())),
                "--register-with-taints="
                f"{REAL_NODE_TAINT['key']}={REAL_NODE_TAINT['value']}:{REAL_NODE_TAINT['effect']}",
                "--v=1",
            ],
            [port, healthz],
        )
    _host.add_apiserver_nat(slot, [n.net.bridge for n in nodes], apiserver_port, host["iptables"])
    report(f"waiting for {len(nodes)} real nodes to register and become Ready")
    _advertise(spec, nodes, kubeconfig, state_dir)
    _kube_router.start(kubeconfig=kubeconfig, state_dir=state_dir, node=nodes[0].name,
                       launch=launch, report=report)


def _spec_labels(spec: ClusterSpec, node: ResolvedNode) -> dict[str, str]:
    """The spec node's labels that a kubelet may set on itself (its own kubernetes.io labels
    it sets; `type=kwok` marks simulated nodes only)."""
    labels = dict(build_node(spec, node)["metadata"]["labels"])
    labels = {
        k: v for k, v in labels.items()
        if k != "type" and not k.split("/")[0].endswith(("kubernetes.io", "k8s.io"))
    }
    labels[REAL_NODE_LABEL] = "true"
    # No GPU is really present here: node agents that select GPU nodes and tolerate every
    # taint (the GPU exporter, whose image only a registry serves) must not land on it and
    # sit in ErrImagePull. The advertised nvidia.com/gpu capacity still places whole-node jobs.
    labels["nvidia.com/gpu.present"] = "false"
    return labels


def extended_resources(spec: ClusterSpec, node: ResolvedNode) -> dict[str, str]:
    """The spec node's GPU and RDMA resources (cpu and memory are the host's real ones)."""
    capacity: dict[str, str] = build_node(spec, node)["status"]["capacity"]
    return {k: v for k, v in capacity.items() if k == GPU_RESOURCE or k.startswith(RDMA_PREFIX)}


def _advertise(
    spec: ClusterSpec, nodes: list[NodeLayout], kubeconfig: Path, state_dir: Path
) -> None:
    """Wait for each kubelet to register its Node, then advertise the spec's extended resources
    with a status patch (the documented way for resources no device plugin reports); wait
    until every real node is Ready and shows them."""
    from trainmaster.kubeclient import ApiError, SyncKube, node_path

    by_name = {n.name: n for n in spec.nodes}
    wanted = {n.name: extended_resources(spec, by_name[n.name]) for n in nodes}
    rails = len(_fabric.plan(spec).rail_mtus)
    # The NIC agent on a node without RDMA devices judges the interfaces this names: the
    # node's ends of the stand-in fabric's rails (its HCAs' netdevs on a RoCE node).
    netdevs = {n.name: ",".join(_fabric.node_rail(n.slot, n.index, k) for k in range(rails))
               for n in nodes}
    annotated: set[str] = set()
    deadline = time.monotonic() + 180
    pending = {n.name for n in nodes}
    with SyncKube.connect(kubeconfig) as kube:
        while pending and time.monotonic() < deadline:
            for name in sorted(pending):
                try:
                    node = kube.get(node_path(name))
                except ApiError as exc:
                    if exc.not_found:
                        continue
                    raise
                if netdevs[name] and name not in annotated:
                    kube.patch(node_path(name), {"metadata": {"annotations": {
                        NIC_NETDEVS_ANNOTATION: netdevs[name]}}})
                    annotated.add(name)
                status = node.get("status") or {}
                alloc = status.get("allocatable") or {}
                ready = any(c.get("type") == "Ready" and c.get("status") == "True"
                            for c in status.get("conditions") or [])
                if any(alloc.get(k) != v for k, v in wanted[name].items()):
                    kube.patch(node_path(name, "status"),
                               {"status": {"capacity": wanted[name],
                                           "allocatable": wanted[name]}})
                elif ready:
                    pending.discard(name)
            if pending:
                time.sleep(0.5)
    if pending:
        logs = "\n".join(
            f"  kubelet of {n}:\n{log_tail(state_dir / 'logs' / f'kubelet-{n}.log', 8)}"
            for n in sorted(pending)
        )
        raise ClusterError(
            f"real nodes not Ready with their resources after 180s: {', '.join(sorted(pending))}"
            f"\n{logs}"
        )


# --- teardown ------------------------------------------------------------------------------


def teardown(state_dir: Path, slot: int, names: list[str]) -> list[str]:
    """After the recorded processes are stopped: kill what outlives them (containers, shims),
    unmount, and remove bridges, veths, NAT rules, cgroups and host files. Returns problems
    that remain (empty when the host is clean)."""
    nodes = layouts(state_dir, slot, names)
    run_dir, data_dir = _host.slot_run_dir(slot), _host.slot_data_dir(slot)
    ours = [str(run_dir) + "/", str(data_dir) + "/", str(state_dir) + "/nodes/"]
    # Containers are in the kubelets' cgroup roots; shims carry their containerd's socket.
    sockets: list[Path] = []
    for _ in range(3):
        pids: set[int] = set()
        for node in nodes:
            pids |= _host.cgroup_pids(node.cgroup_root)
        outliving = _host.pids_mentioning(ours)
        sockets += _host.shim_sockets(outliving)
        pids |= set(outliving)
        if not pids:
            break
        _host.kill_pids(pids)
        _host.wait_gone(pids)
    for sock in sockets:
        sock.unlink(missing_ok=True)
    left_mounts = _host.unmount_all([run_dir, data_dir, state_dir / "nodes"])
    _storage_host.detach(slot)
    _fabric.delete(slot)
    for node in nodes:
        _host.delete_bridge(node.net.bridge)
        _host.remove_cgroup(node.cgroup_root)
        # libcni caches each ADD result host-wide, for our network and for containerd's
        # loopback network ("cni-loopback"), keyed by the sandbox id.
        sandboxes = node.data_dir / "containerd" / "io.containerd.grpc.v1.cri" / "sandboxes"
        ids = [p.name for p in sandboxes.iterdir()] if sandboxes.is_dir() else []
        results = Path("/var/lib/cni/results")
        for cached in results.glob(f"{node.cni_network}-*"):
            cached.unlink(missing_ok=True)
        for sandbox in ids:
            for cached in results.glob(f"*-{sandbox}-*"):
                cached.unlink(missing_ok=True)
    # Host folders that containerd, its shims and libcni make on first use: removed when
    # nothing else (another containerd) left anything in them.
    for top in (Path("/run/containerd"), Path("/var/lib/cni")):
        _host.remove_empty_tree(top)
    iptables = _host._which("iptables")
    if iptables is not None:
        _host.remove_nat(slot, iptables)
    _remove_container_log_links(data_dir)
    left_policy = _kube_router.cleanup(state_dir)
    if not left_mounts:
        shutil.rmtree(run_dir, ignore_errors=True)
        shutil.rmtree(data_dir, ignore_errors=True)
        with contextlib.suppress(OSError):
            _host.DATA_ROOT.rmdir()
    _host.release_slot(slot, state_dir)
    _host.restore_host_state_if_last()
    for folder in (_host.RUN_ROOT / "slots", _host.RUN_ROOT):
        with contextlib.suppress(OSError):
            folder.rmdir()  # only when no other cluster holds a slot
    problems = [f"mount {m}" for m in left_mounts] + left_policy
    left_links = {*_host.leftover_links(slot), *_fabric.links(slot)}
    problems += [f"link {link}" for link in sorted(left_links)]
    problems += [f"ip rule {rule}" for rule in _storage_host.rules(slot)]
    return problems


def _remove_container_log_links(data_dir: Path) -> None:
    # kubelet links every container's log into the host-wide /var/log/containers.
    folder = Path("/var/log/containers")
    if not folder.is_dir():
        return
    for link in folder.iterdir():
        try:
            target = str(link.readlink()) if link.is_symlink() else ""
        except OSError:
            continue
        if target.startswith(str(data_dir) + "/"):
            link.unlink(missing_ok=True)
