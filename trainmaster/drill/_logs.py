"""What the training job really did, read from the files it and the kubelets wrote: the
ranks' log lines (kubelet's CRI log files, each line timestamped by the runtime) and the
checkpoints in the checkpoint volume's host folder. Nothing here is inferred or made up."""

from __future__ import annotations

import re
from dataclasses import dataclass
from datetime import datetime
from pathlib import Path

from trainmaster.cluster import NodeLayout

# The numpy example's ranks each log `rank R step N loss L`; under torchrun the PyTorch
# example's rank 0 alone logs `step N loss L` (after the step's all-reduce, which every
# rank joins) and its resume line ends with the world size it resumed at.
STEP = re.compile(r"^(?:rank (\d+) )?step (\d+) loss ")
RESUMED = re.compile(r"^rank (\d+): resumed from (\S+) at step (\d+)(?: \(world size \d+\))?$")
WORKER_UP = re.compile(r"^rank \d+ of \d+: pid \d+")
"""A torchrun worker's first line, once its process group and model are up."""
RESUMED_RANK0 = re.compile(r"^rank 0: resumed from ")
CHECKPOINT_DIR = re.compile(r"^step-(\d+)$")


@dataclass(frozen=True)
class LogLine:
    time: float
    """Seconds since the epoch, as the runtime stamped the line."""
    text: str


@dataclass
class RankLog:
    pod: str
    lines: list[LogLine]

    def steps(self) -> list[tuple[float, int]]:
        return [(ln.time, int(m.group(2))) for ln in self.lines if (m := STEP.match(ln.text))]

    def last_step(self) -> int | None:
        steps = self.steps()
        return steps[-1][1] if steps else None

    def resumed(self, rank: int | None = None) -> tuple[str, int] | None:
        """Where the first resume line (of `rank`, if given) says it resumed."""
        for ln in self.lines:
            if (m := RESUMED.match(ln.text)) and rank in (None, int(m.group(1))):
                return m.group(2), int(m.group(3))
        return None

    def first_time(self, pattern: re.Pattern[str]) -> float | None:
        """When the first line matching `pattern` was logged."""
        return next((ln.time for ln in self.lines if pattern.match(ln.text)), None)


def _cri_time(stamp: str) -> float:
    # RFC 3339 with nanoseconds; Python parses microseconds.
    head, _, frac = stamp.rstrip("Z").partition(".")
    base = datetime.fromisoformat(head + "+00:00").timestamp()
    return base + (float("0." + frac) if frac else 0.0)


def parse_cri_log(text: str) -> list[LogLine]:
    """`<time> <stream> <P|F> <text>` lines (the CRI log format); partial lines joined."""
    out: list[LogLine] = []
    pending = ""
    for raw in text.splitlines():
        parts = raw.split(" ", 3)
        if len(parts) < 4:
            continue
        stamp, _stream, tag, body = parts
        if tag == "P":
            pending += body
            continue
        out.append(LogLine(_cri_time(stamp), pending + body))
        pending = ""
    return out


def pod_log(nodes: list[NodeLayout], namespace: str, pod: str, container: str = "trainer"
            ) -> RankLog | None:
    """The container's log on whichever real node ran it (every restart's file, in order);
    None once the kubelet has removed it with the pod."""
    for node in nodes:
        for folder in (node.data_dir / "pod-logs").glob(f"{namespace}_{pod}_*/{container}"):
            files = sorted(folder.glob("*.log"), key=lambda p: int(p.stem)
                           if p.stem.isdigit() else -1)
            lines: list[LogLine] = []
            for path in files:
                try:
                    lines += parse_cri_log(path.read_text(errors="replace"))
                except OSError:
                    continue
            return RankLog(pod, lines)
    return None


def checkpoint_steps(folder: Path) -> list[int]:
    """Steps of the complete checkpoints (`step-<N>/COMPLETE`) in the volume's host folder."""
    steps = []
    for entry in folder.iterdir() if folder.is_dir() else []:
        m = CHECKPOINT_DIR.match(entry.name)
        if m and (entry / "COMPLETE").exists():
            steps.append(int(m.group(1)))
    return sorted(steps)
