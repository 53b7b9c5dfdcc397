"""The one node loss (`lose_node`) of the soak and the elastic drills, on real processes:
a real process stands in for the node's kubelet (it is really stopped and resumed) and a
stand-in `ctr` records each container kill with the kubelet's state at that moment. The
real kubelet and containerd path runs in the real-node soak and elastic drills
(tests/cluster/test_real_soak.py, test_real_elastic*.py)."""

from __future__ import annotations

import subprocess
import sys
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from trainmaster.cluster import ClusterError, ClusterRecord, NodeLayout
from trainmaster.cluster._state import ProcessRecord
from trainmaster.drill import _faults
from trainmaster.drill._faults import lose_node, running_containers

NODE = "leaf-0-node-1"


def _state(pid: int) -> str:
    """The process's state letter from /proc (T: stopped)."""
    return Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()[0]


def _wait_state(pid: int, want: str) -> str:
    deadline = time.monotonic() + 5
    while (state := _state(pid)) != want and time.monotonic() < deadline:
        time.sleep(0.01)
    return state


@pytest.fixture
def kubelet() -> Iterator[subprocess.Popen[bytes]]:
    proc = subprocess.Popen(["sleep", "120"])
    yield proc
    proc.kill()  # SIGKILL ends it stopped or not
    proc.wait()


def _ctr(tmp_path: Path, kubelet_pid: int, exit_code: int = 0) -> Path:
    """A stand-in `ctr` that appends `<kubelet state> <its arguments>` to ctr.log, the
    state read once the kubelet has had up to 2 s to stop (a kill before the stop would
    block it there and record the running state)."""
    script = tmp_path / "ctr"
    script.write_text(f"""#!{sys.executable}
import sys, time
from pathlib import Path
stat = Path("/proc/{kubelet_pid}/stat")
deadline = time.monotonic() + 2
state = stat.read_text().rsplit(")", 1)[1].split()[0]
while state != "T" and time.monotonic() < deadline:
    time.sleep(0.01)
    state = stat.read_text().rsplit(")", 1)[1].split()[0]
with open({str(tmp_path / "ctr.log")!r}, "a") as log:
    log.write(state + " " + " ".join(sys.argv[1:]) + "\\n")
if {exit_code}:
    print("ctr: task not found", file=sys.stderr)
sys.exit({exit_code})
""")
    script.chmod(0o755)
    return script


def _setup(tmp_path: Path, monkeypatch: pytest.MonkeyPatch, kubelet_pid: int,
           exit_code: int = 0) -> tuple[list[NodeLayout], ClusterRecord]:
    ctr = _ctr(tmp_path, kubelet_pid, exit_code)
    monkeypatch.setattr(_faults, "tool_path", lambda name: ctr)
    node = NodeLayout(NODE, 1, 0, tmp_path, tmp_path / "run", tmp_path / "data")
    record = ClusterRecord("dev-soak", str(tmp_path), "kc", "spec", 0, 0, 3, processes=[
        ProcessRecord("kubelet-leaf-0-node-0", 1, "log"),
        ProcessRecord(f"kubelet-{NODE}", kubelet_pid, "log"),
    ], real_nodes=[NODE])
    return [node], record


def _pod(*containers: tuple[str, str, str]) -> dict[str, Any]:
    """A Running gang pod on NODE with (name, containerd id, state) containers."""
    return {"metadata": {"name": "dp-example-r0-1-abcde"}, "spec": {"nodeName": NODE},
            "status": {"phase": "Running", "containerStatuses": [
                {"name": name, "containerID": f"containerd://{cid}", "state": {state: {}}}
                for name, cid, state in containers]}}


def _log(tmp_path: Path) -> list[str]:
    path = tmp_path / "ctr.log"
    return path.read_text().splitlines() if path.exists() else []


def test_the_kubelet_is_stopped_before_every_running_container_is_killed(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch,
        kubelet: subprocess.Popen[bytes]) -> None:
    nodes, record = _setup(tmp_path, monkeypatch, kubelet.pid)
    pod = _pod(("trainer", "a" * 64, "running"), ("sidecar", "b" * 64, "running"),
               ("done", "c" * 64, "terminated"))
    lost = lose_node(nodes, record, pod)
    assert _state(kubelet.pid) == "T"
    sock = str(tmp_path / "run" / "containerd.sock")
    # Each kill came with the kubelet already stopped ("T"), trainer first; the
    # terminated container is left alone.
    assert _log(tmp_path) == [
        f"T --address {sock} -n k8s.io tasks kill --signal SIGKILL {'a' * 64}",
        f"T --address {sock} -n k8s.io tasks kill --signal SIGKILL {'b' * 64}",
    ]
    assert (lost.node, lost.pod) == (NODE, "dp-example-r0-1-abcde")
    assert lost.what == (f"kubelet pid {kubelet.pid} (SIGSTOP), then container "
                         f"{'a' * 12} (ctr tasks kill --signal SIGKILL); container "
                         f"{'b' * 12} (ctr tasks kill --signal SIGKILL)")
    # The undo resumes the kubelet (the node comes back); it kills nothing more.
    assert lost.undo is not None
    lost.undo()
    assert _wait_state(kubelet.pid, "S") == "S"
    assert len(_log(tmp_path)) == 2


def test_a_failed_kill_resumes_the_kubelet_and_names_the_container(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch,
        kubelet: subprocess.Popen[bytes]) -> None:
    nodes, record = _setup(tmp_path, monkeypatch, kubelet.pid, exit_code=1)
    with pytest.raises(ClusterError, match=f"ctr tasks kill {'a' * 12} on {NODE}: "
                       "ctr: task not found"):
        lose_node(nodes, record, _pod(("trainer", "a" * 64, "running")))
    assert _log(tmp_path)[0].startswith("T ")  # it was stopped for the kill ...
    assert _wait_state(kubelet.pid, "S") == "S"  # ... and is not left stopped


def test_a_pod_with_no_running_container_leaves_the_node_alone(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch,
        kubelet: subprocess.Popen[bytes]) -> None:
    nodes, record = _setup(tmp_path, monkeypatch, kubelet.pid)
    pod = _pod(("trainer", "a" * 64, "terminated"))
    with pytest.raises(ClusterError, match="dp-example-r0-1-abcde has no running container"):
        lose_node(nodes, record, pod)
    assert _log(tmp_path) == []
    assert _wait_state(kubelet.pid, "S") == "S"


def test_a_node_without_a_recorded_kubelet_is_refused_before_any_kill(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch,
        kubelet: subprocess.Popen[bytes]) -> None:
    nodes, record = _setup(tmp_path, monkeypatch, kubelet.pid)
    record.processes = [p for p in record.processes if p.name != f"kubelet-{NODE}"]
    with pytest.raises(ClusterError, match=f"no kubelet of {NODE}"):
        lose_node(nodes, record, _pod(("trainer", "a" * 64, "running")))
    assert _log(tmp_path) == []


def test_running_containers_are_the_running_ones_in_status_order() -> None:
    pod = _pod(("trainer", "a" * 64, "running"), ("init-like", "b" * 64, "waiting"),
               ("sidecar", "c" * 64, "running"))
    assert running_containers(pod) == ["a" * 64, "c" * 64]
    assert running_containers({"metadata": {"name": "p"}, "status": {}}) == []
