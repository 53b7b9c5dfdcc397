"""An elastic gang for real, on loopback: three `trainmaster launch` processes (min 1,
max 3) run the data-parallel example. One launcher is killed with its training process
(its node is lost): the two others re-rendezvous at world size 2 from the newest
checkpoint on disk within seconds, without any API server. The launcher comes back: the
gang checkpoints on demand and grows back to world size 3 from that checkpoint."""

from __future__ import annotations

import os
import re
import signal
import socket
import subprocess
import sys
import time
from pathlib import Path

from tests.helpers import ROOT
from trainmaster.cluster import free_port

TRAIN = ROOT / "examples" / "data-parallel" / "train.py"
ROUND = re.compile(r"elastic: round (\d+): world size (\d+) .*? this is rank (\d+), resuming "
                   r"from (\S+)")
STEP = re.compile(r"^rank (\d+) step (\d+) loss", re.M)
RESUMED = re.compile(r"^rank 0: resumed from (\S+) at step (\d+)$", re.M)


def _free_ports(count: int) -> int:
    """A base port with `count` free ports after it (looked for, not assumed)."""
    for _ in range(50):
        base = free_port()
        if base + count >= 65535:
            continue
        try:
            socks = []
            for i in range(count):
                s = socket.socket()
                socks.append(s)
                s.bind(("127.0.0.1", base + i))
            return base
        except OSError:
            continue
        finally:
            for s in socks:
                s.close()
    raise AssertionError("no run of free ports")


def _launcher(tmp: Path, index: int, rdzv: int, master: int, tag: str
              ) -> tuple[subprocess.Popen[bytes], Path]:
    log = tmp / f"{tag}-launcher{index}.log"
    env = {
        **os.environ,
        "JOB_COMPLETION_INDEX": str(index),
        "RANK": str(index),
        "TRAINMASTER_ELASTIC": "1:3",
        "TRAINMASTER_RDZV_HOST": "127.0.0.1",
        "TRAINMASTER_RDZV_PORT": str(rdzv),
        "TRAINMASTER_RDZV_PORT_STRIDE": "1",
        "MASTER_ADDR": "127.0.0.1",
        "MASTER_PORT": str(master),
        "TRAINMASTER_CHECKPOINT_DIR": str(tmp / "checkpoints"),
        "TRAINMASTER_CHECKPOINT_KEEP": "50",
        "TM_HP_TRAIN_STEPS": "100000",
        "TM_HP_CHECKPOINT_EVERY": "20",
        "TM_HP_STEP_SECONDS": "0.05",
    }
    env.pop("TRAINMASTER_JOB", None)
    cmd = [sys.executable, "-m", "trainmaster", "launch", "--", sys.executable, str(TRAIN)]
    with log.open("wb") as out:
        proc = subprocess.Popen(cmd, stdout=out, stderr=subprocess.STDOUT, env=env,
                                start_new_session=True)
    return proc, log


def _rounds(log: Path) -> list[tuple[int, int, int, str]]:
    return [(int(n), int(w), int(r), f) for n, w, r, f in ROUND.findall(log.read_text())]


def _wait(what: str, check: object, timeout: float, logs: list[Path]) -> None:
    deadline = time.monotonic() + timeout
    while not check():  # type: ignore[operator]
        if time.monotonic() > deadline:
            tails = "\n".join(f"--- {p.name}\n" + p.read_text()[-3000:] for p in logs)
            raise AssertionError(f"timed out waiting for {what}\n{tails}")
        time.sleep(0.1)


def _steps_since(log: Path, round_number: int) -> list[int]:
    """The steps this launcher's rank logged in the given round and after."""
    text = log.read_text()
    marker = re.search(rf"elastic: round {round_number}: ", text)
    if marker is None:
        return []
    return [int(s) for _, s in STEP.findall(text[marker.end():])]


def _complete(directory: Path) -> list[int]:
    return sorted(int(p.name.split("-")[1]) for p in directory.glob("step-*")
                  if p.name.split("-")[1].isdigit() and (p / "COMPLETE").exists())


def test_a_lost_launcher_shrinks_the_gang_and_a_returning_one_grows_it(tmp_path: Path) -> None:
    rdzv, master = _free_ports(3), _free_ports(1)
    gang = [_launcher(tmp_path, i, rdzv, master, "first") for i in range(3)]
    logs = [log for _, log in gang]
    back: tuple[subprocess.Popen[bytes], Path] | None = None
    try:
        # All three form one round at world size 3 and train past two checkpoints.
        _wait("world size 3", lambda: all(any(w == 3 for _, w, _, _ in _rounds(p))
                                          for p in logs), 60, logs)
        first = _rounds(logs[0])[-1][0]
        _wait("two checkpoints", lambda: len(_complete(tmp_path / "checkpoints")) >= 2, 60,
              logs)
        # Lose launcher 2 with its training process, as a node loss does.
        os.killpg(gang[2][0].pid, signal.SIGKILL)
        killed_at = time.monotonic()
        gang[2][0].wait(10)
        newest = _complete(tmp_path / "checkpoints")[-1]
        _wait("world size 2", lambda: all(any(w == 2 for _, w, _, _ in _rounds(p))
                                          for p in logs[:2]), 30, logs)
        shrunk = next(n for n, w, _, _ in _rounds(logs[0]) if w == 2)
        assert shrunk > first
        _wait("training at world size 2", lambda: all(_steps_since(p, shrunk)
                                                      for p in logs[:2]), 30, logs)
        took = time.monotonic() - killed_at
        assert took < 30, f"training again at world size 2 only after {took:.1f}s"
        # Both ranks resumed from the newest checkpoint on disk at the loss, no older one.
        text0 = logs[0].read_text()
        resumed = [(f, int(s)) for f, s in RESUMED.findall(text0)]
        assert resumed[-1][1] == newest, (resumed, newest)
        assert min(_steps_since(logs[0], shrunk)) == newest + 1
        assert min(_steps_since(logs[1], shrunk)) == newest + 1
        ranks = {p: [r for n, _, r, _ in _rounds(p) if n == shrunk] for p in logs[:2]}
        assert sorted(r for rs in ranks.values() for r in rs) == [0, 1]

        # Launcher 2 returns (its pod is bound again): the gang grows at a checkpoint it
        # asked for, from exactly that checkpoint.
        back = _launcher(tmp_path, 2, rdzv, master, "second")
        logs.append(back[1])
        _wait("world size 3 again", lambda: any(
            n > shrunk and w == 3 for n, w, _, _ in _rounds(back[1])), 60, logs)
        grown = next(n for n, w, _, _ in _rounds(back[1]) if n > shrunk and w == 3)
        _wait("training at world size 3", lambda: all(
            _steps_since(p, grown) for p in (logs[0], logs[1], back[1])), 30, logs)
        text0 = logs[0].read_text()
        on_demand = re.findall(r"rank 0 checkpoint \S+ step (\d+) \(on demand\)", text0)
        assert on_demand, "rank 0 wrote no checkpoint on demand before growing"
        asked = int(on_demand[-1])
        # From that checkpoint, or one rank 0 completed in the moment before it was stopped.
        resumed_at = int(RESUMED.findall(text0)[-1][1])
        assert asked <= resumed_at < asked + 20 and resumed_at in _complete(
            tmp_path / "checkpoints")
        assert min(_steps_since(back[1], grown)) == resumed_at + 1
        assert min(_steps_since(logs[0], grown)) == resumed_at + 1
    finally:
        for proc, _ in [*gang, *([back] if back else [])]:
            if proc.poll() is None:
                os.killpg(proc.pid, signal.SIGKILL)
            proc.wait(30)
