"""`trainmaster bench recovery --torch`: a torchrun worker killed, on loopback, no cluster.

Two "pods" on this machine run the launch script trainmaster renders for a `launcher:
torchrun` job of examples/transformer (bash -> the launcher bundle -> torchrun
--nnodes=2 --nproc-per-node=1 --max-restarts=N, c10d rendezvous hosted by pod 0 ->
train.py: DDP over gloo, DCP checkpoints every 10 steps). Once a checkpoint is saved and
a few steps more are trained, one worker process is SIGKILLed (its pod goes on); the run
times the kill to the first step trained again, and checks that no pod ended and that the
workers resumed at the last checkpoint. Needs a clone of the repository (the example) and
torch (`uv sync --extra torch`); **not** the real nodes: the figure is loopback's.
"""

from __future__ import annotations

import contextlib
import os
import re
import signal
import subprocess
import sys
import tempfile
import threading
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import yaml

from trainmaster.api import (
    CHECKPOINT_DIR_ENV,
    GANG_UID_ENV,
    JOB_ENV,
    METRICS_PORT_ENV,
    RDZV_PORT_ENV,
)
from trainmaster.bench._errors import BenchError

ROOT = Path(__file__).resolve().parents[2]
TRAIN = ROOT / "examples" / "transformer" / "train.py"
STACK = ROOT / "stacks" / "dev" / "cluster.yaml"
TORCH_SCENARIO = "torch-worker-kill (loopback)"
STEP_LINE = re.compile(r"^step (\d+) loss ([0-9.]+)$")


@dataclass
class LoopbackPod:
    """One pod's launch script, and its output lines with the time each arrived."""

    proc: subprocess.Popen[str]
    lines: list[tuple[float, str]] = field(default_factory=list)

    def read(self) -> None:
        assert self.proc.stdout is not None
        for line in self.proc.stdout:
            self.lines.append((time.monotonic(), line.rstrip("\n")))

    def wait_for(self, pattern: str, after: float = 0.0, seconds: float = 600
                 ) -> tuple[float, re.Match[str]]:
        deadline = time.monotonic() + seconds
        seen = 0
        while time.monotonic() < deadline:
            for at, line in self.lines[seen:]:
                seen += 1
                match = re.search(pattern, line)
                if match and at >= after:
                    return at, match
            if self.proc.poll() is not None and seen == len(self.lines):
                break
            time.sleep(0.05)
        tail = "\n".join(line for _, line in self.lines[-20:])
        raise BenchError(f"no line matching {pattern!r} in a pod's output; its last "
                         f"lines:\n{tail}")

    def match(self, pattern: str, after: float = 0.0, seconds: float = 600) -> re.Match[str]:
        """``wait_for``'s match alone."""
        return self.wait_for(pattern, after, seconds)[1]

    def at(self, pattern: str, after: float = 0.0) -> float:
        """When the first line matching ``pattern`` since ``after`` arrived."""
        for at, line in self.lines:
            if at >= after and re.search(pattern, line):
                return at
        raise BenchError(f"no line matching {pattern!r} in a pod's output")

    def steps(self) -> list[tuple[int, float]]:
        """The steps the pod's rank printed, with their losses."""
        return [(int(m[1]), float(m[2])) for _, line in self.lines
                if (m := STEP_LINE.match(line))]

    def kill(self) -> None:
        """The pod's processes: its process group and the workers it printed."""
        workers = [int(m[1]) for _, line in self.lines
                   if (m := re.match(r"^rank \d+ of \d+: pid (\d+)", line))]
        with contextlib.suppress(ProcessLookupError):
            os.killpg(self.proc.pid, signal.SIGKILL)
        for pid in workers:
            with contextlib.suppress(ProcessLookupError):
                os.kill(pid, signal.SIGKILL)
        with contextlib.suppress(subprocess.TimeoutExpired):
            self.proc.wait(30)


def _check_ready() -> None:
    if not TRAIN.is_file() or not STACK.is_file():
        raise BenchError(f"--torch needs a clone of the repository: {TRAIN} is missing")
    try:
        import torch  # noqa: F401
    except ImportError:
        raise BenchError("--torch needs torch in this python: uv sync --extra torch "
                         "(PyPI's torch 2.15.0 with its CUDA libraries)") from None


def _pod_env(folder: Path, index: int, port: int, bundle: Path) -> tuple[str, dict[str, str]]:
    """The launch script and pod `index`'s environment, as the gang's Job gives them."""
    from trainmaster.objects import build_gang_job, render_launch_script
    from trainmaster.spec import load_spec_text

    doc = yaml.safe_load(STACK.read_text())
    doc["jobs"].append({
        "name": "lm", "image": "trainmaster.local/torch:2.15.0", "launcher": "torchrun",
        "nodes": 2, "gpusPerPod": 8, "cpuPerPod": 1, "memoryPerPod": "2Gi",
        "command": ["python", str(TRAIN)],
        "hyperParameters": {"trainSteps": 100_000, "checkpointEvery": 10},
        "arguments": {"hyperParameter": "--{name} {value}"},
        "env": {"NPROC_PER_NODE": "1"},  # one CPU worker per pod
        "checkpoint": {"volume": "checkpoints", "path": "/checkpoints/lm"},
        "restartPolicy": {"maxRestarts": 3},
    })
    spec = load_spec_text(yaml.safe_dump(doc), str(STACK))
    job = spec.job("lm")
    container = build_gang_job(spec, job, attempt=1)["spec"]["template"]["spec"][
        "containers"][0]
    env = {e["name"]: e["value"] for e in container["env"] if "value" in e}
    env.update({
        "JOB_COMPLETION_INDEX": str(index), "MASTER_ADDR": "127.0.0.1",
        RDZV_PORT_ENV: str(port), GANG_UID_ENV: f"bench-{port}",
        CHECKPOINT_DIR_ENV: str(folder / "checkpoints"),
        "TRAINMASTER_LAUNCHER": str(bundle), JOB_ENV: "",
        METRICS_PORT_ENV: "", "TM_HP_DATA_DIR": str(folder / "data"),
        "PATH": f"{Path(sys.executable).parent}:{os.environ.get('PATH', '')}",
        "HOME": os.environ.get("HOME", "/tmp"),
    })
    return render_launch_script(job), env


def _one_kill(report: Callable[[str], None]) -> dict[str, Any]:
    from trainmaster.cluster import free_port
    from trainmaster.drill import story_shards
    from trainmaster.launch import write_bundle

    with tempfile.TemporaryDirectory(prefix="trainmaster-torch-bench-") as name:
        folder = Path(name)
        (folder / "data").mkdir()
        for i, shard in enumerate(story_shards()):
            (folder / "data" / f"shard-{i:03d}.txt").write_bytes(shard)
        bundle = write_bundle(folder / "launcher")
        port = free_port()
        pods: list[LoopbackPod] = []
        try:
            for index in range(2):
                script, env = _pod_env(folder, index, port, bundle)
                (folder / "launch.sh").write_text(script)
                pod = LoopbackPod(subprocess.Popen(
                    ["bash", str(folder / "launch.sh")], stdout=subprocess.PIPE,
                    stderr=subprocess.STDOUT, text=True, env=env, start_new_session=True))
                threading.Thread(target=pod.read, daemon=True).start()
                pods.append(pod)
            report("torch loopback: two pods started; waiting for step-20 and 3 steps more")
            rank0 = next(p for p in pods if p.wait_for(r"^rank (\d) of 2: pid")[1][1] == "0")
            rank1 = next(p for p in pods if p is not rank0)
            pid = int(rank1.wait_for(r"^rank 1 of 2: pid (\d+)")[1][1])
            rank0.wait_for(r"^checkpoint .*step-20 \(step 20\)")
            _, at_kill = rank0.wait_for(r"^step (2[3-9]) loss")
            killed_at = time.monotonic()
            os.kill(pid, signal.SIGKILL)
            report(f"torch loopback: killed rank 1's worker (pid {pid}) at step {at_kill[1]}")
            loaded, resumed = rank0.wait_for(
                r"^rank 0: resumed from .*step-(\d+) at step (\d+) \(world size 2\)",
                after=killed_at)
            again = int(resumed[2]) + 1
            trained, _ = rank0.wait_for(rf"^step {again} loss", after=loaded)
            up = max(p.wait_for(r"^rank \d of 2: pid \d+, torchrun restart",
                                after=killed_at)[0] for p in pods)
            ended = sum(p.proc.poll() is not None for p in pods)
        finally:
            for pod in pods:
                pod.kill()
    return {"scenario": TORCH_SCENARIO, "training_again_seconds": round(trained - killed_at, 2),
            "workers_up_seconds": round(up - killed_at, 2),
            "checkpoint_loaded_seconds": round(loaded - killed_at, 2),
            "resumed_step": int(resumed[2]), "pods_ended": ended,
            "ok": ended == 0 and int(resumed[2]) >= 20, "target_seconds": 5}


def run_torch_loopback_bench(repeat: int, report: Callable[[str], None]
                             ) -> list[dict[str, Any]]:
    """`repeat` kills, each on a fresh gang; one row each."""
    _check_ready()
    rows = []
    for _ in range(repeat):
        rows.append(_one_kill(report))
        report(f"torch loopback: {rows[-1]}")
    return rows
