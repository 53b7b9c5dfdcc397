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
# forkserver (trainmaster/launch/_torchrun.py): the worker carries the forkserver's
# command line, not the script's.
_FORKSERVER_AGENT = """
import multiprocessing, sys, time
from pathlib import Path

def work(out):
    Path(out).write_text(str(__import__("os").getpid()))
    time.sleep(60)

if __name__ == "__main__":
    ctx = multiprocessing.get_context("forkserver")
    ctx.Process(target=work, args=(sys.argv[1],)).start()
    time.sleep(60)
"""


def _descendants(root: int) -> list[int]:
    found = [root]
    for _ in range(4):
        found += [int(p.name) for p in Path("/proc").iterdir() if p.name.isdigit()
                  and _ppid(int(p.name)) in found and int(p.name) not in found]
    return found


def test_a_worker_forked_from_torchruns_forkserver_is_chosen(tmp_path: Path) -> None:
    script = tmp_path / "train.py"
    script.write_text(_FORKSERVER_AGENT)
    out = tmp_path / "worker.pid"
    top = subprocess.Popen([sys.executable, str(script), str(out)])
    try:
        deadline = time.monotonic() + 30
        while not (out.exists() and out.read_text()) and time.monotonic() < deadline:
            time.sleep(0.1)
        worker = int(out.read_text())
        pid, argv = training_process(_descendants(top.pid))
        assert pid == worker
        assert argv[0] == "worker forked by", argv
        assert any(a.endswith("train.py") for a in argv), argv
    finally:
        for pid in reversed(_descendants(top.pid)):
            subprocess.run(["kill", "-9", str(pid)], check=False)
        top.wait()


def test_torchruns_agent_without_a_worker_is_not_taken_for_one(tmp_path: Path) -> None:
    """Between two rounds (a grow, a restart) torchrun's agent has no worker: the agent is
    then the only leaf naming the script, and a worker fault must wait, not kill it."""
    script = tmp_path / "train.py"
    script.write_text("")
    agent = subprocess.Popen([sys.executable, "-c",
                              "import time; time.sleep(60)  # trainmaster.launch._torchrun",
                              str(script)])
    try:
        with pytest.raises(NoWorker, match=f"torchrun's agent {agent.pid} has no worker"):
            training_process([agent.pid])
    finally:
        agent.kill()
        agent.wait()
