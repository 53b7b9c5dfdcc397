"""Which process a worker kill hits, found among real processes: under torchrun three
processes name the training script (the launch wrapper, torchrun, the worker), and the
fault must reach the worker, the one that is no other's parent."""

from __future__ import annotations

import subprocess
import sys
import time
from pathlib import Path

import pytest

from trainmaster.drill._faults import NoWorker, _ppid, training_process

# Each level starts the next with the script's path in its arguments, as the launch
# wrapper starts torchrun and torchrun its worker.
_LEVEL = """
import subprocess, sys, time
depth = int(sys.argv[2])
if depth > 1:
    child = subprocess.Popen([sys.executable, sys.argv[0], sys.argv[1], str(depth - 1)])
time.sleep(60)
"""


def _chain(tmp_path: Path, depth: int) -> tuple[subprocess.Popen[bytes], list[int]]:
    script = tmp_path / "train.py"
    script.write_text(_LEVEL)
    top = subprocess.Popen([sys.executable, str(script), str(script), str(depth)])
    pids = [top.pid]
    deadline = time.monotonic() + 20
    while len(pids) < depth and time.monotonic() < deadline:
        children = [int(p.name) for p in Path("/proc").iterdir() if p.name.isdigit()
                    and _ppid(int(p.name)) == pids[-1]]
        if children:
            pids.append(children[0])
        else:
            time.sleep(0.05)
    assert len(pids) == depth
    return top, pids


def test_the_worker_under_torchrun_is_chosen_not_torchrun(tmp_path: Path) -> None:
    top, pids = _chain(tmp_path, 3)  # wrapper -> torchrun -> worker
    try:
        pid, argv = training_process(pids)
        assert pid == pids[-1]
        assert argv[1].endswith("train.py")
    finally:
        for pid in reversed(pids):
            subprocess.run(["kill", "-9", str(pid)], check=False)
        top.wait()


def test_the_python_launcher_s_script_is_chosen_not_the_wrapper(tmp_path: Path) -> None:
    top, pids = _chain(tmp_path, 2)  # wrapper -> script
    try:
        assert training_process(pids)[0] == pids[-1]
    finally:
        for pid in reversed(pids):
            subprocess.run(["kill", "-9", str(pid)], check=False)
        top.wait()


# torchrun under trainmaster's launcher forks its workers from a multiprocessing
# forkserver that preloads the launcher's module (trainmaster/launch/_torchrun.py): the
# worker carries the forkserver's command line, not the script's, and that command line
# names the module as the agent's does. Run as `python -c AGENT out mode .../train.py`,
# like the launcher's agent (`python -c "...trainmaster.launch._torchrun..." ... train.py`).
_AGENT = """
import multiprocessing, sys, time
from multiprocessing import forkserver
from pathlib import Path
multiprocessing.set_forkserver_preload(["trainmaster.launch._torchrun"])
forkserver.ensure_running()
pid = 0
if sys.argv[2] == "worker":
    worker = multiprocessing.get_context("forkserver").Process(target=time.sleep, args=(60,))
    worker.start()
    pid = worker.pid
Path(sys.argv[1]).write_text(str(pid))
time.sleep(60)
"""


def _descendants(root: int) -> list[int]:
    found = [root]
    for _ in range(4):
        found += [int(p.name) for p in Path("/proc").iterdir() if p.name.isdigit()
                  and _ppid(int(p.name)) in found and int(p.name) not in found]
    return found


def _agent(tmp_path: Path, mode: str) -> tuple[subprocess.Popen[bytes], int]:
    """An agent with a forkserver, and a worker forked from it if `mode` is "worker"."""
    script = tmp_path / "train.py"
    script.write_text("")
    out = tmp_path / f"{mode}.pid"
    agent = subprocess.Popen([sys.executable, "-c", _AGENT, str(out), mode, str(script)])
    deadline = time.monotonic() + 30
    while not (out.exists() and out.read_text()) and time.monotonic() < deadline:
        time.sleep(0.1)
    return agent, int(out.read_text())


def _stop(agent: subprocess.Popen[bytes]) -> None:
    for pid in reversed(_descendants(agent.pid)):
        subprocess.run(["kill", "-9", str(pid)], check=False)
    agent.wait()


def test_a_worker_forked_from_torchruns_forkserver_is_chosen(tmp_path: Path) -> None:
    agent, worker = _agent(tmp_path, "worker")
    try:
        pid, argv = training_process(_descendants(agent.pid))
        assert pid == worker
        assert argv[0] == "worker forked by", argv
        assert any(a.endswith("train.py") for a in argv), argv
    finally:
        _stop(agent)


def test_torchruns_forkserver_without_a_worker_is_not_taken_for_one(tmp_path: Path) -> None:
    agent, _ = _agent(tmp_path, "none")
    try:
        with pytest.raises(NoWorker, match=r"torchrun.s forkserver \d+ has no worker"):
            training_process(_descendants(agent.pid))
    finally:
        _stop(agent)


def _wait_named(pid: int) -> None:
    """Popen returns once exec began, before the new command line is in /proc."""
    deadline = time.monotonic() + 10
    while b"train.py" not in Path(f"/proc/{pid}/cmdline").read_bytes():
        assert time.monotonic() < deadline, f"process {pid} did not start"
        time.sleep(0.05)


def test_torchruns_agent_without_a_worker_is_not_taken_for_one(tmp_path: Path) -> None:
    """Between two rounds (a grow, a restart) torchrun's agent has no worker: the agent is
    then the only leaf naming the script, and a worker fault must wait, not kill it."""
    script = tmp_path / "train.py"
    script.write_text("")
    agent = subprocess.Popen([sys.executable, "-c",
                              "import time; time.sleep(60)  # trainmaster.launch._torchrun",
                              str(script)])
    try:
        _wait_named(agent.pid)
        with pytest.raises(NoWorker, match=f"torchrun's agent {agent.pid} has no worker"):
            training_process([agent.pid])
    finally:
        agent.kill()
        agent.wait()


def test_the_launch_wrapper_before_torchrun_started_is_not_taken_for_a_worker(
        tmp_path: Path) -> None:
    """Soak run 5's last fault: right after a container restart the launch wrapper
    (`trainmaster-launch.pyz -- torchrun ... train.py`) was the only process naming the
    script, and the worker kill killed it."""
    script = tmp_path / "train.py"
    script.write_text("")
    wrapper = subprocess.Popen([sys.executable, "-c", "import time; time.sleep(60)", "--",
                                "torchrun", "--nnodes=1:2", str(script)])
    try:
        _wait_named(wrapper.pid)
        with pytest.raises(NoWorker):
            training_process([wrapper.pid])
    finally:
        wrapper.kill()
        wrapper.wait()
