"""Host-level pieces of real nodes: Debian packages, network slots, bridges, NAT, cleanup.

Real nodes share this host, so everything host-global they create is named after a *slot*
(0-15) that one cluster claims for its lifetime: bridges ``tm<slot>n<i>``, pod subnets
``10.244.<slot*16+i>.0/24``, the nat chain ``TM-S<slot>`` and ``/run/trainmaster/s<slot>``.
Two clusters with real nodes can then run side by side, and `down` removes exactly its own.
"""

from __future__ import annotations

import contextlib
import ipaddress
import os
import shutil
import signal
import subprocess
import time
from dataclasses import dataclass
from pathlib import Path

from trainmaster import procstat
from trainmaster.cluster._processes import ClusterError

RUN_ROOT = Path("/run/trainmaster")
DATA_ROOT = Path("/var/lib/trainmaster")
SLOTS = 16
POD_NETWORK = ipaddress.ip_network("10.244.0.0/16")
# The `kubernetes` Service's ClusterIP (first address of --service-cluster-ip-range).
KUBERNETES_SERVICE_IP = "10.0.0.1"

# Debian packages real nodes need: the OCI runtime, iptables for the API-server NAT rule, and
# busybox-static for the node's own sandbox and test images.
HOST_PACKAGES = {"runc": "runc", "iptables": "iptables", "busybox": "busybox-static"}


def _which(binary: str) -> str | None:
    return shutil.which(binary) or next(
        (str(p) for d in ("/usr/sbin", "/sbin", "/bin") if (p := Path(d) / binary).exists()),
        None,
    )


def missing_packages() -> list[str]:
    return sorted({pkg for binary, pkg in HOST_PACKAGES.items() if _which(binary) is None})


def require_host() -> dict[str, str]:
    """Paths of runc, iptables and busybox; a clear error if this host cannot run real nodes."""
    if os.geteuid() != 0:
        raise ClusterError(
            "--real-nodes needs root (kubelet and containerd manage cgroups, mounts and network "
            "namespaces); run as root or use --real-nodes 0"
        )
    missing = missing_packages()
    if missing:
        raise ClusterError(
            f"--real-nodes needs Debian packages that are not installed: {' '.join(missing)}; "
            f"run `make host-packages` (apt-get install {' '.join(missing)})"
        )
    if not Path("/sys/fs/cgroup").is_dir():
        raise ClusterError("--real-nodes needs cgroups mounted under /sys/fs/cgroup")
    return {binary: str(_which(binary)) for binary in HOST_PACKAGES}


def run(argv: list[str], check: bool = True) -> subprocess.CompletedProcess[str]:
    proc = subprocess.run(argv, capture_output=True, text=True)
    if check and proc.returncode != 0:
        raise ClusterError(f"`{' '.join(argv)}` failed: {proc.stderr.strip() or proc.stdout}")
    return proc


# --- slots ---------------------------------------------------------------------------------


def _slot_file(slot: int) -> Path:
    return RUN_ROOT / "slots" / str(slot)


def claim_slot(state_dir: Path) -> int:
    """The first slot that no live cluster holds; recorded in /run/trainmaster/slots/<n>."""
    (RUN_ROOT / "slots").mkdir(parents=True, exist_ok=True)
    for slot in range(SLOTS):
        path = _slot_file(slot)
        try:
            fd = os.open(path, os.O_CREAT | os.O_EXCL | os.O_WRONLY, 0o644)
        except FileExistsError:
            owner = Path(path.read_text().strip() or "/nonexistent")
            if (owner / "cluster.json").exists() and owner != state_dir:
                continue
            path.write_text(str(state_dir))  # a stale claim (its cluster is gone)
            return slot
        with os.fdopen(fd, "w") as fh:
            fh.write(str(state_dir))
        return slot
    raise ClusterError(
        f"all {SLOTS} real-node network slots are held by running clusters "
        f"(see {RUN_ROOT / 'slots'}); stop one with `trainmaster cluster down`"
    )


def slot_holders() -> dict[int, Path]:
    """Each claimed slot and the state folder of the cluster that claimed it."""
    held = {}
    for slot in range(SLOTS):
        with contextlib.suppress(OSError):
            held[slot] = Path(_slot_file(slot).read_text().strip())
    return held


def release_slot(slot: int, state_dir: Path) -> None:
    path = _slot_file(slot)
    with contextlib.suppress(OSError):
        if Path(path.read_text().strip()) == state_dir:
            path.unlink()


@dataclass(frozen=True)
class NodeNet:
    """Addresses of one real node's pod network."""

    bridge: str
    subnet: ipaddress.IPv4Network

    @property
    def gateway(self) -> str:
        """The bridge's address: the pods' gateway (node 0's is every real node's InternalIP)."""
        return str(self.subnet.network_address + 1)


def node_net(slot: int, index: int) -> NodeNet:
    if index >= 16:
        raise ClusterError("at most 16 real nodes per cluster (--real-nodes)")
    subnet = ipaddress.IPv4Network(f"10.244.{slot * 16 + index}.0/24")
    return NodeNet(bridge=f"tm{slot}n{index}", subnet=subnet)


def slot_run_dir(slot: int) -> Path:
    """Short host paths (unix sockets are limited to 107 bytes) for containerd state."""
    return RUN_ROOT / f"s{slot}"


def slot_data_dir(slot: int) -> Path:
    """Short host paths on disk for kubelet's and containerd's roots: kubelet makes unix
    sockets deep inside its root dir (pod-resources/<n>), and a state folder under pytest's
    or a user's home can be too long for them; pod volumes want disk, not /run's tmpfs."""
    return DATA_ROOT / f"s{slot}"


def nat_chain(slot: int) -> str:
    return f"TM-S{slot}"


# --- host-wide state kubelet changes ------------------------------------------------------

# kubelet sets these host-wide at start (protectKernelDefaults: false, the default); `up` saves
# the host's values before the first real node starts and the last `down` puts them back.
KUBELET_SYSCTLS = (
    "vm/overcommit_memory",
    "vm/panic_on_oom",
    "kernel/panic",
    "kernel/panic_on_oops",
    "kernel/keys/root_maxkeys",
    "kernel/keys/root_maxbytes",
)
# Fixed host paths every kubelet uses whatever its root dir: the device-plugin socket and
# checkpoint (/var/lib/kubelet/device-plugins) and the container log links.
KUBELET_HOST_DIRS = (Path("/var/lib/kubelet"), Path("/var/log/containers"))
_SAVED = RUN_ROOT / "host-state.json"


def save_host_state() -> None:
    """Before the first real node on this host: the kernel tunables and which of kubelet's
    fixed folders exist, so that the last `down` can put the host back as it was."""
    import json

    if _SAVED.exists():  # another cluster's real nodes saved the host's own state already
        return
    RUN_ROOT.mkdir(parents=True, exist_ok=True)
    _SAVED.write_text(json.dumps({
        "sysctls": {k: Path(f"/proc/sys/{k}").read_text().strip() for k in KUBELET_SYSCTLS},
        "created": [str(d) for d in KUBELET_HOST_DIRS if not d.exists()],
    }))


def restore_host_state_if_last() -> None:
    import json

    slots = RUN_ROOT / "slots"
    if (slots.is_dir() and any(slots.iterdir())) or not _SAVED.exists():
        return
    saved = json.loads(_SAVED.read_text())
    for key, value in saved["sysctls"].items():
        with contextlib.suppress(OSError):
            Path(f"/proc/sys/{key}").write_text(value)
    for folder in saved["created"]:
        if not mounts_under([Path(folder)]):
            shutil.rmtree(folder, ignore_errors=True)
    for made in saved.get("created_files", []):
        Path(made).unlink(missing_ok=True)
    _SAVED.unlink()


# kubelet's device-manager checkpoint (the path is fixed, whatever the root dir). Multus reads
# it, when no kubelet pod-resources socket is at its fixed path, to find the devices a pod was
# given for a NAD with a `k8s.v1.cni.cncf.io/resourceName` annotation (the rendered rails).
# kubelet writes it only once a device plugin registers, and none runs here: without it
# Multus refuses every rail NAD ("error reading file .../kubelet_internal_checkpoint").
DEVICE_CHECKPOINT = Path("/var/lib/kubelet/device-plugins/kubelet_internal_checkpoint")


def ensure_device_checkpoint() -> None:
    """Write an empty device-manager checkpoint (no devices given to any pod, the truth here)
    unless one exists; the last `down` removes it if `up` wrote it. The kubelets do not
    recognise its checksum (0) and say so once as they start ("Continue after failing to
    read checkpoint file"), then go on: they have no devices to restore."""
    import json

    if DEVICE_CHECKPOINT.exists():
        return
    DEVICE_CHECKPOINT.parent.mkdir(parents=True, exist_ok=True)
    DEVICE_CHECKPOINT.write_text(json.dumps(
        {"Data": {"PodDeviceEntries": None, "RegisteredDevices": {}}, "Checksum": 0}))
    saved = json.loads(_SAVED.read_text())
    saved["created_files"] = [*saved.get("created_files", []), str(DEVICE_CHECKPOINT)]
    _SAVED.write_text(json.dumps(saved))


# --- network -------------------------------------------------------------------------------


def _sysctl(bridge: str, key: str, value: str) -> None:
    Path(f"/proc/sys/net/ipv4/conf/{bridge}/{key}").write_text(value)


def _routes_overlap(subnet: ipaddress.IPv4Network) -> str | None:
    for line in run(["ip", "-4", "route", "show"]).stdout.splitlines():
        dest = line.split()[0]
        if dest == "default":
            continue
        with contextlib.suppress(ValueError):
            if ipaddress.ip_network(dest, strict=False).overlaps(subnet):
                return line
    return None


def create_bridge(net: NodeNet) -> None:
    """The node's bridge with its gateway address, forwarding on it only (the host's global
    ip_forward stays as it is, so nothing is routed to or from the host's own interfaces)."""
    clash = _routes_overlap(net.subnet)
    if clash is not None:
        raise ClusterError(
            f"the pod subnet {net.subnet} of bridge {net.bridge} overlaps a host route "
            f"({clash}); remove it or stop the cluster that owns it"
        )
    run(["ip", "link", "add", net.bridge, "type", "bridge"])
    run(["ip", "addr", "add", f"{net.gateway}/{net.subnet.prefixlen}", "dev", net.bridge])
    run(["ip", "link", "set", net.bridge, "up"])
    _sysctl(net.bridge, "forwarding", "1")
    # Pods reach the API server (on 127.0.0.1) through a DNAT rule; the kernel routes a
    # packet to or from 127.0.0.1 over a non-loopback device only with route_localnet.
    _sysctl(net.bridge, "route_localnet", "1")


def delete_bridge(bridge: str) -> None:
    run(["ip", "link", "delete", bridge], check=False)


def leftover_links(slot: int) -> list[str]:
    """Links that belong to slot: its bridges and the pods' veths still attached to them."""
    out = run(["ip", "-o", "link", "show"]).stdout
    names = []
    for line in out.splitlines():
        name = line.split(":")[1].strip().split("@")[0]
        if name.startswith(f"tm{slot}n") or f" master tm{slot}n" in line:
            names.append(name)
    return names


def add_apiserver_nat(slot: int, bridges: list[str], apiserver_port: int, iptables: str) -> None:
    """Pods' in-cluster config dials the `kubernetes` Service (10.0.0.1:443); send it to the API
    server on 127.0.0.1, from this slot's bridges only, in a chain of the slot's own."""
    chain = nat_chain(slot)
    run([iptables, "-w", "-t", "nat", "-N", chain])
    for bridge in bridges:
        run([
            iptables, "-w", "-t", "nat", "-A", chain, "-i", bridge, "-p", "tcp",
            "-d", KUBERNETES_SERVICE_IP, "--dport", "443",
            "-j", "DNAT", "--to-destination", f"127.0.0.1:{apiserver_port}",
        ])
    run([iptables, "-w", "-t", "nat", "-I", "PREROUTING", "-j", chain])


def remove_nat(slot: int, iptables: str) -> None:
    chain = nat_chain(slot)
    unjump = [iptables, "-w", "-t", "nat", "-D", "PREROUTING", "-j", chain]
    while run(unjump, check=False).returncode == 0:
        pass
    run([iptables, "-w", "-t", "nat", "-F", chain], check=False)
    run([iptables, "-w", "-t", "nat", "-X", chain], check=False)


def nat_rules(slot: int, iptables: str) -> list[str]:
    out = run([iptables, "-w", "-t", "nat", "-S"], check=False).stdout
    return [line for line in out.splitlines() if nat_chain(slot) in line]


# --- processes, cgroups, mounts ------------------------------------------------------------


def _cmdline(pid: int) -> list[str]:
    try:
        return Path(f"/proc/{pid}/cmdline").read_bytes().decode(errors="replace").split("\0")
    except OSError:
        return []


def pids_mentioning(needles: list[str]) -> list[int]:
    """Processes whose command line mentions one of needles (e.g. a containerd socket path:
    its shims carry it as -address, and shims run in sessions of their own)."""
    found = []
    for entry in Path("/proc").iterdir():
        if not entry.name.isdigit() or int(entry.name) == os.getpid():
            continue
        line = " ".join(_cmdline(int(entry.name)))
        if any(n in line for n in needles):
            found.append(int(entry.name))
    return found


def shim_sockets(pids: list[int]) -> list[Path]:
    """The sockets that containerd shims among pids listen on: containerd names them
    /run/containerd/s/<sha256 of address/namespace/id> whatever its own state folder, and a
    killed shim leaves them behind."""
    import hashlib

    sockets = []
    for pid in pids:
        argv = _cmdline(pid)
        opts = {argv[i]: argv[i + 1] for i in range(len(argv) - 1) if argv[i].startswith("-")}
        if not {"-namespace", "-id", "-address"} <= set(opts):
            continue
        base = f"{opts['-address']}/{opts['-namespace']}/{opts['-id']}"
        for path in (base, base + "/debug"):
            sockets.append(Path("/run/containerd/s") / hashlib.sha256(path.encode()).hexdigest())
    return sockets


def cgroup_dirs(name: str) -> list[Path]:
    """The folder of cgroup `name` (a top-level cgroup) in every mounted hierarchy."""
    dirs = []
    for controller in Path("/sys/fs/cgroup").iterdir():
        path = controller / name
        if path.is_dir():
            dirs.append(path)
    return dirs


def create_cgroup(name: str) -> None:
    """Make the top-level cgroup `name` in every v1 hierarchy: kubelet wants its cgroup root to
    exist. A new cpuset cgroup has no CPUs or memory nodes until given its parent's."""
    for controller in Path("/sys/fs/cgroup").iterdir():
        if not (controller / "cgroup.procs").exists():
            continue  # not a hierarchy (e.g. a symlink such as cpu,cpuacct's aliases)
        path = controller / name
        path.mkdir(exist_ok=True)
        for key in ("cpuset.cpus", "cpuset.mems"):
            if (path / key).exists() and not (path / key).read_text().strip():
                (path / key).write_text((controller / key).read_text())


def cgroup_pids(name: str) -> set[int]:
    pids: set[int] = set()
    for root in cgroup_dirs(name):
        for procs in root.rglob("cgroup.procs"):
            with contextlib.suppress(OSError, ValueError):
                pids.update(int(p) for p in procs.read_text().split())
    return pids


def kill_pids(pids: set[int] | list[int]) -> None:
    for pid in pids:
        with contextlib.suppress(ProcessLookupError, PermissionError):
            os.kill(pid, signal.SIGKILL)


def wait_gone(pids: set[int] | list[int], timeout: float = 10.0) -> list[int]:
    deadline = time.monotonic() + timeout
    left = list(pids)
    while left and time.monotonic() < deadline:
        left = [p for p in left if Path(f"/proc/{p}").exists() and not _zombie(p)]
        if left:
            time.sleep(0.05)
    return left


def _zombie(pid: int) -> bool:
    return procstat.state(pid) in (None, "Z")


def remove_cgroup(name: str) -> None:
    """rmdir the cgroup tree `name` in every hierarchy, leaves first (cgroups are folders whose
    files cannot be deleted; an empty cgroup goes with rmdir)."""
    for root in cgroup_dirs(name):
        folders = [p for p in root.rglob("*") if p.is_dir()]
        for folder in sorted(folders, key=lambda p: -len(p.parts)):
            with contextlib.suppress(OSError):
                folder.rmdir()
        with contextlib.suppress(OSError):
            root.rmdir()


def remove_empty_tree(top: Path) -> None:
    """rmdir every empty folder under top, and top itself if it ends up empty."""
    if not top.is_dir():
        return
    for folder in sorted((p for p in top.rglob("*") if p.is_dir() and not p.is_symlink()),
                         key=lambda p: -len(p.parts)):
        with contextlib.suppress(OSError):
            folder.rmdir()
    with contextlib.suppress(OSError):
        top.rmdir()


def mounts_under(prefixes: list[Path]) -> list[str]:
    """Mount points at or under any of prefixes, deepest first."""
    points = []
    for line in Path("/proc/self/mountinfo").read_text().splitlines():
        point = line.split()[4].replace("\\040", " ")
        if any(point == str(p) or point.startswith(str(p) + "/") for p in prefixes):
            points.append(point)
    return sorted(set(points), key=lambda p: -p.count("/"))


def unmount_all(prefixes: list[Path]) -> list[str]:
    """Unmount everything under prefixes (repeatedly: a bind mount may be stacked)."""
    for _ in range(5):
        points = mounts_under(prefixes)
        if not points:
            return []
        for point in points:
            if run(["umount", point], check=False).returncode != 0:
                run(["umount", "-l", point], check=False)
    return mounts_under(prefixes)
