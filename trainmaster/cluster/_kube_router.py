"""kube-router's NetworkPolicy controller on the real nodes: one per host, for one cluster.

kube-router (``--run-firewall`` only: no routing, no service proxy) writes the host's filter
table and ipsets. The real nodes share this host's one network namespace, so:

- **One instance per cluster.** kube-router enforces the policies of the pods whose
  ``status.hostIP`` is one of its Node's addresses (read once at start). Every real node of a
  cluster reports the same InternalIP (the first node's bridge address, _real_nodes), so the
  one instance, started as the first real node, sees every real node's pods as its own.
- **One cluster per host.** Each full sync drops every ``KUBE-POD-FW-*``/``KUBE-NWPLCY-*``
  chain and ``KUBE-SRC-*``/``KUBE-DST-*`` ipset it did not make, whoever made them, so two
  instances (two clusters on other slots) would delete each other's rules. A host-wide lock
  (``/run/trainmaster/kube-router.lock``, held by the process for its life through flock(1))
  lets one cluster enforce; a second cluster runs without enforcement and ``cluster up``
  says so.
- **iptables-nft.** kube-router runs ``iptables``, ``iptables-save``, ``iptables-restore``
  and ``ipset`` from PATH; a folder of links put first on its PATH names the nf_tables
  variant, the host's default, where kubelet's chains and the API server NAT rule live
  (rules in the legacy tables would be invisible to ``iptables-save`` here and evaluated
  apart from them).

``cluster down`` stops the process with the cluster's others, then (when this cluster held
the lock) removes every kube-router chain and ipset and the lock file (``cleanup``).

It talks to the API server as ``kube-system/kube-router`` with the ClusterRole
``trainmaster-kube-router``: list and watch of what its informers read, get of its Node.
"""

from __future__ import annotations

import contextlib
import os
import shlex
import urllib.request
from collections.abc import Callable
from pathlib import Path
from typing import Any

from trainmaster.cluster import _host, _identity
from trainmaster.cluster._processes import ClusterError, free_port, wait_until
from trainmaster.toolchain import is_built, tool_path

NAMESPACE = "kube-system"
SERVICE_ACCOUNT = "kube-router"
CLUSTER_ROLE = "trainmaster-kube-router"
LOCK = _host.RUN_ROOT / "kube-router.lock"
OWNER = _host.RUN_ROOT / "kube-router.owner"
"""The state folder of the cluster whose kube-router holds the lock."""
CONFLICT_EXIT = 75
"""flock(1)'s exit code when another cluster holds the lock."""

# kube-router v2.9.0's chains and ipsets (pkg/controllers/netpol: its constants).
CHAIN_PREFIXES = ("KUBE-ROUTER-", "KUBE-POD-FW-", "KUBE-NWPLCY-")
IPSET_PREFIXES = ("KUBE-SRC-", "KUBE-DST-")
IPTABLES = {"iptables": "iptables-nft", "iptables-save": "iptables-nft-save",
            "iptables-restore": "iptables-nft-restore"}

# kube-router starts informers for all six kinds, whichever controllers run (pkg/cmd), and
# gets its own Node once; the firewall only reads.
RULES: list[dict[str, Any]] = [
    {"apiGroups": [""], "resources": ["pods", "namespaces", "services"],
     "verbs": ["list", "watch"]},
    {"apiGroups": [""], "resources": ["nodes"], "verbs": ["get", "list", "watch"]},
    {"apiGroups": ["networking.k8s.io"], "resources": ["networkpolicies"],
     "verbs": ["list", "watch"]},
    {"apiGroups": ["discovery.k8s.io"], "resources": ["endpointslices"],
     "verbs": ["list", "watch"]},
]

Launch = Callable[[str, list[str], list[int]], tuple[Any, Path]]
Report = Callable[[str], None]


def identity_documents() -> list[dict[str, Any]]:
    return _identity.cluster_identity("kube-router", namespace=NAMESPACE, account=SERVICE_ACCOUNT,
                                      role=CLUSTER_ROLE, rules=RULES)


def install(kubeconfig: Path, out_dir: Path, timeout: float = 60) -> Path:
    """Apply kube-router's identity; return the path of its own kubeconfig."""
    return _identity.install(kubeconfig, identity_documents(), namespace=NAMESPACE,
                             account=SERVICE_ACCOUNT, out=out_dir / "kube-router.kubeconfig",
                             timeout=timeout)


def _which_nft() -> dict[str, str]:
    found = {name: _host._which(target) for name, target in IPTABLES.items()}
    found["ipset"] = _host._which("ipset")
    return {name: path for name, path in found.items() if path is not None}


def missing() -> str | None:
    """Why kube-router cannot run here, or None."""
    if not is_built("kube-router"):
        return ("kube-router is not built: run `trainmaster tools build kube-router` (with "
                "--sources DIR holding its upstream archive)")
    absent = sorted((set(IPTABLES) | {"ipset"}) - set(_which_nft()))
    if absent:
        return f"{', '.join(absent)} not found: run `make host-packages`"
    return None


def holder() -> str | None:
    """The state folder of the cluster whose kube-router enforces on this host, or None."""
    import fcntl

    if not LOCK.exists():
        return None
    with LOCK.open("a") as fh:
        try:
            fcntl.flock(fh, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except BlockingIOError:
            try:
                return OWNER.read_text().strip() or "another cluster"
            except OSError:
                return "another cluster"
        fcntl.flock(fh, fcntl.LOCK_UN)
    return None


def _healthy(port: int) -> bool:
    with urllib.request.urlopen(f"http://127.0.0.1:{port}/healthz", timeout=2) as resp:
        return bool(resp.status == 200)


def _synced() -> bool:
    """kube-router's first full sync jumped to its chains from the host's FORWARD."""
    save = _host.run([_which_nft()["iptables-save"], "-t", "filter"], check=False).stdout
    return "-j KUBE-ROUTER-FORWARD" in save


def start(*, kubeconfig: Path, state_dir: Path, node: str, launch: Launch,
          report: Report) -> bool:
    """Start kube-router for this cluster's real nodes if no other cluster of this host
    enforces; True when it enforces. ``node``: the real node it runs as (its Node's
    InternalIP is every real node's)."""
    why = missing()
    other = holder() if why is None else None
    if why is not None or other is not None:
        reason = why or f"kube-router already enforces for the cluster at {other} (one per host)"
        report(f"WARNING: NetworkPolicies are NOT enforced on this cluster's real nodes: {reason}")
        return False
    folder = state_dir / "kube-router"
    report("installing kube-router's identity (ServiceAccount, RBAC, token)")
    own = install(kubeconfig, folder)
    bin_dir = folder / "bin"
    bin_dir.mkdir(parents=True, exist_ok=True)
    for name, path in _which_nft().items():
        link = bin_dir / name
        link.unlink(missing_ok=True)
        link.symlink_to(path)
    _host.RUN_ROOT.mkdir(parents=True, exist_ok=True)
    health = free_port()
    marker = folder / "enforcing"
    marker.write_text("started\n")  # from here on `down` removes what it made
    report("starting kube-router (NetworkPolicy controller)")
    proc, log = launch("kube-router", [
        "/usr/bin/env", f"PATH={bin_dir}:{os.environ.get('PATH', '/usr/sbin:/usr/bin')}",
        "flock", "--nonblock", "--conflict-exit-code", str(CONFLICT_EXIT), str(LOCK),
        str(tool_path("kube-router")),
        f"--kubeconfig={own}", f"--hostname-override={node}",
        "--run-firewall=true", "--run-router=false", "--run-service-proxy=false",
        "--service-cluster-ip-range=10.0.0.0/24", f"--health-port={health}",
        "--metrics-port=0", "--v=1",
    ], [health])
    try:
        wait_until(lambda: _healthy(health) and _synced(), "kube-router", 90, proc, log)
    except ClusterError:
        if proc.poll() == CONFLICT_EXIT:  # another cluster took the lock meanwhile
            marker.unlink()  # its chains are not ours to remove
            report("WARNING: NetworkPolicies are NOT enforced on this cluster's real nodes: "
                   "another cluster's kube-router took the host's lock first")
            return False
        raise
    OWNER.write_text(f"{state_dir}\n")
    return True


def enforcing(state_dir: Path) -> bool:
    """Whether this cluster's kube-router was started and enforces (until `down`)."""
    return (state_dir / "kube-router" / "enforcing").exists()


def leftovers() -> list[str]:
    """kube-router's chains and ipsets present on this host."""
    tools = _which_nft()
    left: list[str] = []
    if "iptables-save" in tools:
        save = _host.run([tools["iptables-save"], "-t", "filter"], check=False).stdout
        left += [f"chain {line[1:].split()[0]}" for line in save.splitlines()
                 if line.startswith(":") and line[1:].startswith(CHAIN_PREFIXES)]
    if "ipset" in tools:
        names = _host.run([tools["ipset"], "list", "-n"], check=False).stdout.split()
        left += [f"ipset {n}" for n in names if n.startswith(IPSET_PREFIXES)]
    return left


def cleanup(state_dir: Path) -> list[str]:
    """After the process stopped: remove kube-router's jumps, chains and ipsets and the lock
    file, when this cluster's kube-router made them. Returns what is left."""
    if not enforcing(state_dir):
        return []
    tools = _which_nft()
    iptables = [tools["iptables"], "-w", "-t", "filter"]
    save = _host.run([tools["iptables-save"], "-t", "filter"], check=False).stdout
    chains = [line[1:].split()[0] for line in save.splitlines()
              if line.startswith(":") and line[1:].startswith(CHAIN_PREFIXES)]
    for line in save.splitlines():
        # The jumps from the built-in chains first (-D takes the rule as -A listed it).
        words = shlex.split(line)
        if words[:1] == ["-A"] and words[1] in ("INPUT", "FORWARD", "OUTPUT") and any(
                w.startswith(CHAIN_PREFIXES) for w in words[2:]):
            _host.run([*iptables, "-D", *words[1:]], check=False)
    for chain in chains:
        _host.run([*iptables, "-F", chain], check=False)
    for chain in chains:
        _host.run([*iptables, "-X", chain], check=False)
    names = _host.run([tools["ipset"], "list", "-n"], check=False).stdout.split()
    for name in names:
        if name.startswith(IPSET_PREFIXES):
            _host.run([tools["ipset"], "destroy", name], check=False)
    with contextlib.suppress(OSError):
        if OWNER.read_text().strip() == str(state_dir):
            OWNER.unlink()
    if holder() is None:  # its process is gone: nobody enforces on this host now
        LOCK.unlink(missing_ok=True)
    (state_dir / "kube-router" / "enforcing").unlink(missing_ok=True)
    return leftovers()
