"""The data-parallel example as the gang runs it, on loopback: two ranks under
`trainmaster launch`, with the environment the launch script gives each pod. One rank's
training process is killed; the gang fails; a new gang resumes from the last complete
checkpoint through TRAINMASTER_RESUME_FROM and continues at the step after it with the
very losses the first run had there (the state was really restored, not restarted)."""

from __future__ import annotations

import os
import re
import signal
import subprocess
import sys
import time
from pathlib import Path

from tests.helpers import ROOT
from trainmaster.cluster import free_port

TRAIN = ROOT / "examples" / "data-parallel" / "train.py"
STEP_LINE = re.compile(r"^rank (\d+) step (\d+) loss (\S+)$", re.M)


def _start_gang(tmp: Path, tag: str, port: int, steps: int, resume_from: str = "") -> list[
        tuple[subprocess.Popen[bytes], Path]]:
    gang = []
    for rank in range(2):
        log = tmp / f"{tag}-rank{rank}.log"
        env = {
            **os.environ,
            # What launch.sh.j2 exports for the python launcher, on loopback.
            "JOB_COMPLETION_INDEX": str(rank),
            "RANK": str(rank),
            "WORLD_SIZE": "2",
            "MASTER_ADDR": "127.0.0.1",
            "MASTER_PORT": str(port),
            "TRAINMASTER_CHECKPOINT_DIR": str(tmp / "checkpoints"),
            "TRAINMASTER_CHECKPOINT_KEEP": "3",
            "TRAINMASTER_RESUME_FROM": resume_from,
            "TM_HP_TRAIN_STEPS": str(steps),
            "TM_HP_CHECKPOINT_EVERY": "10",
            "TM_HP_STEP_SECONDS": "0.05",
        }
        env.pop("TRAINMASTER_JOB", None)  # no TrainingJob to report to: launch only wraps
        cmd = [sys.executable, "-m", "trainmaster", "launch", "--",
               sys.executable, str(TRAIN)]
        with log.open("wb") as out:
            proc = subprocess.Popen(cmd, stdout=out, stderr=subprocess.STDOUT, env=env)
        gang.append((proc, log))
    return gang


def _child_of(pid: int) -> int:
    """The training process `trainmaster launch` started."""
    deadline = time.monotonic() + 30
    while time.monotonic() < deadline:
        children = Path(f"/proc/{pid}/task/{pid}/children").read_text().split()
        if children:
            return int(children[0])
        time.sleep(0.1)
    raise AssertionError(f"trainmaster launch (pid {pid}) started no training process")


def _steps(log: Path) -> dict[int, str]:
    return {int(step): loss for rank, step, loss in STEP_LINE.findall(log.read_text())
            if rank == "0"}


def _complete_checkpoints(directory: Path) -> list[int]:
    return sorted(int(p.name.split("-")[1]) for p in directory.glob("step-*")
                  if p.name.split("-")[1].isdigit() and (p / "COMPLETE").exists())


def _stop(gang: list[tuple[subprocess.Popen[bytes], Path]]) -> None:
    for proc, _ in gang:
        if proc.poll() is None:
            proc.kill()
        proc.wait(timeout=30)


def test_killed_rank_fails_the_gang_and_the_next_gang_resumes_at_the_checkpoint(
        tmp_path: Path) -> None:
    first = _start_gang(tmp_path, "first", free_port(), steps=100_000)
    try:
        deadline = time.monotonic() + 120
        # Kill between checkpoints, after two: steps past the last one are lost and replayed.
        while len(_complete_checkpoints(tmp_path / "checkpoints")) < 2 \
                or max(_steps(first[0][1]), default=0) % 10 not in (3, 4, 5, 6):
            assert time.monotonic() < deadline, (tmp_path / "first-rank0.log").read_text()
            assert all(p.poll() is None for p, _ in first), "a rank ended before the kill"
            time.sleep(0.02)
        os.kill(_child_of(first[1][0].pid), signal.SIGKILL)
        # rank 1's wrapper reports the kill as 128+9; rank 0 loses its peer and fails.
        assert first[1][0].wait(timeout=60) == 128 + signal.SIGKILL
        assert first[0][0].wait(timeout=60) != 0
    finally:
        _stop(first)
    before = _steps(first[0][1])
    checkpoint = _complete_checkpoints(tmp_path / "checkpoints")[-1]
    assert max(before) > checkpoint, "the run went on past its last checkpoint before the kill"

    resume_from = str(tmp_path / "checkpoints" / f"step-{checkpoint}")
    second = _start_gang(tmp_path, "second", free_port(), steps=checkpoint + 15,
                         resume_from=resume_from)
    try:
        assert [p.wait(timeout=180) for p, _ in second] == [0, 0]
    finally:
        _stop(second)
    rank0 = second[0][1].read_text()
    assert f"rank 0: resumed from {resume_from} at step {checkpoint}" in rank0
    assert "rank 1: resumed from rank 0 at step " + str(checkpoint) in second[1][1].read_text()
    after = _steps(second[0][1])
    assert min(after) == checkpoint + 1 and max(after) == checkpoint + 15
    # The steps the first gang ran past the checkpoint, and lost, come out the same again.
    replayed = sorted(set(before) & set(after))
    assert replayed, "no step overlaps between the runs"
    assert {s: after[s] for s in replayed} == {s: before[s] for s in replayed}
    assert _complete_checkpoints(tmp_path / "checkpoints")[-1] == checkpoint + 10


def test_checkpoint_padding_weighs_each_checkpoint_and_is_never_read_back(
        tmp_path: Path) -> None:
    """checkpointPadBytes (what the realnode test of checkpoints over the storage network
    uses to make each checkpoint weigh): pad.bin of that size in every checkpoint, written
    before COMPLETE, and a resume from a padded checkpoint goes on where it stopped."""
    env = {**os.environ, "RANK": "0", "WORLD_SIZE": "1", "MASTER_ADDR": "127.0.0.1",
           "MASTER_PORT": str(free_port()), "TRAINMASTER_CHECKPOINT_DIR": str(tmp_path),
           "TM_HP_CHECKPOINT_EVERY": "5", "TM_HP_CHECKPOINT_PAD_BYTES": "65536"}
    first = subprocess.run([sys.executable, str(TRAIN), "--train-steps", "10"], env=env,
                           capture_output=True, text=True, timeout=120)
    assert first.returncode == 0, first.stderr
    for step in (5, 10):
        assert (tmp_path / f"step-{step}" / "pad.bin").stat().st_size == 65536
        assert (tmp_path / f"step-{step}" / "COMPLETE").exists()
    second = subprocess.run([sys.executable, str(TRAIN), "--train-steps", "12",
                             "--resume-from", str(tmp_path / "step-10")], env=env,
                            capture_output=True, text=True, timeout=120)
    assert second.returncode == 0, second.stderr
    assert f"rank 0: resumed from {tmp_path / 'step-10'} at step 10" in second.stdout
    assert STEP_LINE.findall(second.stdout)[0][1] == "11"
