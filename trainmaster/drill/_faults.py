"""Real faults on a real node: nothing is told to the API server, the operator finds out
the way it would on any cluster.

- `kill_process`: SIGKILL to the training process itself, found on the host through its
  container's cgroup (the container's id from the pod's status);
- `kill_container`: SIGKILL to the container's task through its node's containerd (`ctr
  tasks kill`), which takes every process of the container with it;
- `hang_process`: SIGSTOP to the training process (found as for `kill_process`): it stays
  alive and makes no progress, as a rank stuck in a collective or on a hung file system
  does; the launcher beside it keeps serving its metrics, whose heartbeat stops moving.
  `Killed.undo` (SIGCONT) lets it go on;
- `take_rail_down`: `ip link set <interface> down` on the node's interface of rail 0 (its
  HCA's netdev on the stand-in fabric): the node is cut off that rail as by a pulled cable;
  `Killed.undo` sets it up again;
- `stop_kubelet`: SIGSTOP to the node's kubelet: it stops renewing its Lease and reporting
  status, so the node controller marks the node NotReady (its containers run on, as they
  do when a kubelet hangs); `Killed.undo` (SIGCONT) brings it back;
- `lose_node`: a node lost, as to a power cut: its kubelet stopped (`stop_kubelet`), then
  every running container of the victim pod killed (as `kill_container`), so the rank is
  gone at once and nothing reports it until the node controller's grace has passed.
  `Killed.undo` resumes the kubelet (the node comes back Ready; its killed containers stay
  dead). The one node loss of the soak and the elastic drills.
"""

from __future__ import annotations

import contextlib
import os
import signal
import subprocess
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from trainmaster import polling, procstat
from trainmaster.cluster import ClusterError, ClusterRecord, NodeLayout, _host
from trainmaster.toolchain import tool_path

TRAINING_SCRIPT = "train.py"


@dataclass(frozen=True)
class Killed:
    what: str
    """What was killed, for the report (pid and command, or the container id)."""
    node: str
    pod: str
    undo: Callable[[], None] | None = None
    """Puts the node back as it was (a stopped kubelet resumed), if the fault needs it."""
    device: str = ""
    """The node's interface the fault took down, if it was one."""


def container_id(pod: dict[str, Any], container: str = "trainer") -> str:
    for status in (pod.get("status") or {}).get("containerStatuses") or []:
        if status.get("name") == container and status.get("containerID"):
            return str(status["containerID"]).split("://", 1)[-1]
    raise ClusterError(f"pod {pod['metadata']['name']} has no running container {container}")


def _node(nodes: list[NodeLayout], pod: dict[str, Any]) -> NodeLayout:
    name = pod["spec"].get("nodeName")
    for node in nodes:
        if node.name == name:
            return node
    raise ClusterError(f"pod {pod['metadata']['name']} is on {name}, not on a real node")


def container_pids(node: NodeLayout, cid: str) -> list[int]:
    """The host pids of a container's processes: its cgroup is `<pod cgroup>/<id>` under the
    node's kubelet cgroup root (cgroupfs driver)."""
    for root in _host.cgroup_dirs(node.cgroup_root):
        if root.parent.name != "pids":
            continue
        for folder in root.rglob(cid):
            procs = folder / "cgroup.procs"
            if procs.exists():
                return [int(p) for p in procs.read_text().split()]
    raise ClusterError(f"no cgroup for container {cid[:12]} under {node.cgroup_root}")


def _cmdline(pid: int) -> list[str]:
    try:
        return Path(f"/proc/{pid}/cmdline").read_bytes().decode(errors="replace").split("\0")
    except OSError:
        return []


def _ppid(pid: int) -> int:
    return procstat.parent(pid) or 0


FORKSERVER_MAIN = "from multiprocessing.forkserver import main"
"""The command line of a multiprocessing forkserver, and of every worker forked from it:
torchrun's workers under trainmaster's launcher (trainmaster/launch/_torchrun.py)."""


TORCHRUN_AGENT = "trainmaster.launch._torchrun"
"""In the command line of torchrun's agent under trainmaster's launcher (it names the
training script too): a leaf that is the agent, or its forkserver, means no worker runs.
The forkserver preloads that module, so its command line (and every forked worker's)
names it as well: the agent is the one that is not a forkserver's."""

WORKER_WAIT_SECONDS = 30.0
"""How long a worker fault waits for torchrun to have a worker (between two rounds the
agent has none: a grow or a restart in progress)."""


class NoWorker(ClusterError):
    """torchrun's agent runs, but no worker of it right now."""


def _forkserver(argv: list[str]) -> bool:
    return any(a.startswith(FORKSERVER_MAIN) for a in argv)


def _torchrun(argv: list[str]) -> bool:
    """The launch wrapper before its agent started (``... -- torchrun ... train.py``), or
    plain torchrun: naming the script, yet no worker."""
    return not _forkserver(argv) and any(a == "torchrun" or a.endswith("/torchrun")
                                         for a in argv)


def _agent(argv: list[str]) -> bool:
    return not _forkserver(argv) and any(TORCHRUN_AGENT in a for a in argv)


def training_process(pids: list[int]) -> tuple[int, list[str]]:
    """The process that runs the training script: of the container's processes whose
    command line names it (the `trainmaster launch` wrapper names it too, and so does
    torchrun, whose worker it is) or that are a forkserver or forked from one (torchrun's
    workers forked from its preloaded forkserver carry the forkserver's command line),
    the one that is no other's parent. A forked worker's command is shown as its
    torchrun's."""
    commands = {pid: _cmdline(pid) for pid in pids}
    named = {pid: argv for pid, argv in commands.items()
             if _forkserver(argv) or any(a.endswith(TRAINING_SCRIPT) for a in argv)}
    parents = {_ppid(pid) for pid in named}
    leaves = [pid for pid in named if pid not in parents]
    if len(leaves) != 1:
        raise ClusterError(f"expected one {TRAINING_SCRIPT} process among {pids}, found "
                           f"{ {p: ' '.join(a) for p, a in named.items()} }")
    pid = leaves[0]
    argv = named[pid]
    if _agent(argv) or _torchrun(argv):
        raise NoWorker(f"torchrun's agent {pid} has no worker right now")
    if _forkserver(argv) and _agent(named.get(_ppid(pid), [])):
        raise NoWorker(f"torchrun's forkserver {pid} has no worker right now")
    ancestor = pid
    while not any(a.endswith(TRAINING_SCRIPT) for a in argv) and ancestor in named:
        ancestor = _ppid(ancestor)  # the forkserver, then torchrun
        if ancestor in named and any(a.endswith(TRAINING_SCRIPT) for a in named[ancestor]):
            argv = ["worker forked by", *named[ancestor]]
    return pid, argv


def _worker(node: NodeLayout, pod: dict[str, Any]) -> tuple[int, list[str]]:
    """The pod's training process; under torchrun, waits for its agent to have a worker
    (a fault meant for the worker must not hit the agent between two rounds)."""
    try:
        return polling.wait_until(
            lambda: _found_worker(node, pod),
            f"a worker of torchrun in {pod['metadata']['name']}",
            timeout=WORKER_WAIT_SECONDS, every=0.2)
    except polling.WaitTimeout as err:
        raise NoWorker(str(err)) from err


def _found_worker(node: NodeLayout, pod: dict[str, Any]) -> tuple[int, list[str]] | None:
    try:
        return training_process(container_pids(node, container_id(pod)))
    except NoWorker:
        return None


def kill_process(nodes: list[NodeLayout], record: ClusterRecord, pod: dict[str, Any]
                 ) -> Killed:
    node = _node(nodes, pod)
    pid, argv = _worker(node, pod)
    os.kill(pid, signal.SIGKILL)
    return Killed(f"pid {pid} ({' '.join(a for a in argv if a)})", node.name,
                  pod["metadata"]["name"])


def hang_process(nodes: list[NodeLayout], record: ClusterRecord, pod: dict[str, Any]
                 ) -> Killed:
    node = _node(nodes, pod)
    pid, argv = _worker(node, pod)
    os.kill(pid, signal.SIGSTOP)

    def resume() -> None:
        with contextlib.suppress(ProcessLookupError):
            os.kill(pid, signal.SIGCONT)

    return Killed(f"pid {pid} ({' '.join(a for a in argv if a)}) SIGSTOP", node.name,
                  pod["metadata"]["name"], resume)


def kill_container(nodes: list[NodeLayout], record: ClusterRecord, pod: dict[str, Any],
                   cid: str = "") -> Killed:
    """SIGKILL to container `cid` of the pod (default: its trainer) through containerd."""
    node = _node(nodes, pod)
    cid = cid or container_id(pod)
    ctr = [str(tool_path("ctr")), "--address", str(node.socket), "-n", "k8s.io"]
    done = subprocess.run([*ctr, "tasks", "kill", "--signal", "SIGKILL", cid],
                          capture_output=True, text=True, check=False)
    if done.returncode != 0:
        raise ClusterError(f"ctr tasks kill {cid[:12]} on {node.name}: {done.stderr.strip()}")
    return Killed(f"container {cid[:12]} (ctr tasks kill --signal SIGKILL)", node.name,
                  pod["metadata"]["name"])


def stop_kubelet(nodes: list[NodeLayout], record: ClusterRecord, pod: dict[str, Any]
                 ) -> Killed:
    node = _node(nodes, pod)
    kubelets = [p for p in record.processes if p.name == f"kubelet-{node.name}"]
    if not kubelets:
        raise ClusterError(f"no kubelet of {node.name} in the cluster's record")
    pid = kubelets[-1].pid
    os.kill(pid, signal.SIGSTOP)

    def resume() -> None:
        with contextlib.suppress(ProcessLookupError):
            os.kill(pid, signal.SIGCONT)

    return Killed(f"kubelet pid {pid} (SIGSTOP)", node.name, pod["metadata"]["name"], resume)


def running_containers(pod: dict[str, Any]) -> list[str]:
    """The ids of the pod's containers that run now, in its status's order."""
    return [str(status["containerID"]).split("://", 1)[-1]
            for status in (pod.get("status") or {}).get("containerStatuses") or []
            if status.get("containerID") and "running" in (status.get("state") or {})]


def lose_node(nodes: list[NodeLayout], record: ClusterRecord, pod: dict[str, Any]
              ) -> Killed:
    """The module docstring's node loss. The kubelet is stopped first, so that it cannot
    report the killed containers: the API learns of the loss only from the node going
    NotReady, as with a node that lost power. If a kill fails, the kubelet is resumed
    before the error is raised (no node left half lost)."""
    stopped = stop_kubelet(nodes, record, pod)
    try:
        cids = running_containers(pod)
        if not cids:
            raise ClusterError(f"pod {pod['metadata']['name']} has no running container "
                               "to kill")
        killed = [kill_container(nodes, record, pod, cid) for cid in cids]
    except BaseException:
        if stopped.undo is not None:
            stopped.undo()
        raise
    return Killed(f"{stopped.what}, then {'; '.join(k.what for k in killed)}", stopped.node,
                  stopped.pod, stopped.undo)


def take_rail_down(nodes: list[NodeLayout], record: ClusterRecord, pod: dict[str, Any]
                   ) -> Killed:
    node = _node(nodes, pod)
    interface = node.rail(0)  # the rail the launcher's all-reduce uses first
    _host.run(["ip", "link", "set", interface, "down"])

    def link_up() -> None:
        _host.run(["ip", "link", "set", interface, "up"], check=False)

    return Killed(f"ip link set {interface} down", node.name, pod["metadata"]["name"],
                  link_up, interface)
