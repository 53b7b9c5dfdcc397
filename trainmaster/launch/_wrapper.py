"""`trainmaster launch -- CMD`: run the training command and report for it.

The wrapper is transparent: the command's stdout and stderr pass through unchanged, the
signals the pod gets (SIGTERM on deletion, SIGINT) are passed on, and it exits with the
command's exit code (128+N when killed by signal N), which is what the operator's
retryable-exit-code policy reads.

Progress it reports as a heartbeat, at most every --heartbeat-seconds (see _progress):
- a training step newer than the last, parsed from the output with --step-pattern;
- a step written to $TRAINMASTER_PROGRESS_FILE, or a touch of $TRAINMASTER_HEARTBEAT_FILE,
  for quiet programs;
- a completed checkpoint (see _checkpoints).
Before it starts the command, it may move the resume point to a newer complete checkpoint
in the checkpoint directory, the same one on every rank (see _resume).
Other output is not progress. Only rank 0 reports to the TrainingJob by default ($RANK
when torchrun runs the wrapper, else the pod's JOB_COMPLETION_INDEX): ranks of one gang
progress together, and one writer keeps the API load flat however large the gang. Every
rank serves its own progress as Prometheus metrics when given --metrics-port.
"""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import tempfile
import threading
import time
from collections.abc import Mapping
from dataclasses import dataclass
from datetime import datetime
from pathlib import Path
from types import FrameType
from typing import IO, Any

from trainmaster.api import UTC as UTC_ZONE
from trainmaster.launch._checkpoints import CheckpointWatcher, Found
from trainmaster.launch._metrics import LaunchMetrics
from trainmaster.launch._progress import (
    PROGRESS_FILE_ENV,
    STEP_PATTERN,
    STEP_PATTERN_ENV,
    LineFeed,
    Progress,
    compile_step_pattern,
)
from trainmaster.launch._rails import has_rdma_devices, interface_addresses, rail_env
from trainmaster.launch._reporter import ApiSink, Sink
from trainmaster.launch._resume import plan_start, print_notes

FORWARDED = (signal.SIGTERM, signal.SIGINT, signal.SIGHUP, signal.SIGUSR1, signal.SIGUSR2)
HEARTBEAT_FILE_ENV = "TRAINMASTER_HEARTBEAT_FILE"


@dataclass(frozen=True)
class LaunchConfig:
    job: str | None
    namespace: str | None
    rank: int | None = None
    checkpoint_dir: Path | None = None
    heartbeat_seconds: float = 15.0
    settle_seconds: float = 5.0
    poll_seconds: float = 1.0
    all_ranks: bool = False
    kubeconfig: Path | None = None
    step_pattern: str = STEP_PATTERN
    """Regular expression whose first group is the step; "" reads no steps from output."""
    metrics_port: int | None = None
    metrics_address: str = "127.0.0.1"
    attempt: int = 0

    @classmethod
    def from_env(cls, env: Mapping[str, str] | None = None, **options: Any) -> LaunchConfig:
        """From the environment the gang's pods get (TRAINMASTER_JOB, TRAINMASTER_NAMESPACE,
        TRAINMASTER_CHECKPOINT_DIR, JOB_COMPLETION_INDEX); options override it."""
        env = os.environ if env is None else env
        # Inside torchrun (`torchrun ... trainmaster launch -- python train.py`) RANK is the
        # global rank; around it, the pod's index in the Indexed Job is.
        rank = env.get("RANK") or env.get("JOB_COMPLETION_INDEX", "")
        ckpt = env.get("TRAINMASTER_CHECKPOINT_DIR")
        kubeconfig = env.get("KUBECONFIG")
        port = env.get("TRAINMASTER_METRICS_PORT", "")
        attempt = env.get("TRAINMASTER_RESTART", "")
        values: dict[str, Any] = {
            "job": env.get("TRAINMASTER_JOB") or None,
            "namespace": env.get("TRAINMASTER_NAMESPACE") or None,
            "rank": int(rank) if rank.isdigit() else None,
            "checkpoint_dir": Path(ckpt) if ckpt else None,
            "kubeconfig": Path(kubeconfig.split(os.pathsep)[0]) if kubeconfig else None,
            "metrics_port": int(port) if port.isdigit() else None,
            "metrics_address": env.get("TRAINMASTER_METRICS_ADDRESS") or "127.0.0.1",
            "attempt": int(attempt) if attempt.isdigit() else 0,
        }
        if STEP_PATTERN_ENV in env:
            values["step_pattern"] = env[STEP_PATTERN_ENV]
        values.update({k: v for k, v in options.items() if v is not None})
        return cls(**values)

    @property
    def reports(self) -> bool:
        return bool(self.job and self.namespace) and (self.all_ranks or self.rank in (None, 0))


def _forward(source: IO[bytes], target: IO[bytes], lines: LineFeed) -> None:
    fd = source.fileno()
    while True:
        chunk = os.read(fd, 65536)
        if not chunk:
            return
        lines.feed(chunk)
        try:
            target.write(chunk)
            target.flush()
        except (BrokenPipeError, ValueError):
            pass  # nobody reads our output any more; keep draining so the child never blocks


class _Reports:
    """What to report on each tick, given the watcher, the progress and what was sent."""

    def __init__(self, config: LaunchConfig, sink: Sink, progress: Progress,
                 heartbeat_file: Path, progress_file: Path,
                 metrics: LaunchMetrics | None = None) -> None:
        self.config = config
        self.sink = sink
        self.progress = progress
        self.heartbeat_file = heartbeat_file
        self.progress_file = progress_file
        self.metrics = metrics
        self.started = time.time()  # the start is the first sign of life
        self.watcher = (CheckpointWatcher(config.checkpoint_dir, config.settle_seconds)
                        if config.checkpoint_dir is not None else None)
        self.pending: Found | None = None
        self.sent_at = 0.0
        self.sent_activity = 0.0

    def resumed(self, path: str, step: int | None) -> None:
        """The gang resumes from a newer checkpoint than the operator passed: that is its
        last checkpoint now (sent with the first tick), and the TrainingJob records it."""
        if step is None:
            return
        if self.watcher is not None:
            self.watcher.reported_step = max(self.watcher.reported_step, step)
        self.pending = Found(Path(path), step, "resumed")
        when = datetime.fromtimestamp(time.time(), UTC_ZONE)
        self.sink.resumed(path, step, self.config.attempt, when)

    def _last_progress(self) -> float:
        try:
            touched = self.heartbeat_file.stat().st_mtime
        except OSError:
            touched = 0.0
        self.progress.read_file(self.progress_file)
        return max(self.started, self.progress.at, touched)

    def tick(self, force: bool = False) -> None:
        now = time.time()
        if self.watcher is not None:
            found_now = self.watcher.poll()
            if found_now is not None and self.metrics is not None:
                self.metrics.checkpointed(found_now.step, now)
            self.pending = found_now or self.pending
            if self.pending is not None:
                found = self.pending
                when = datetime.fromtimestamp(now, UTC_ZONE)
                if self.sink.checkpoint(str(found.path), found.step, when):
                    self.pending = None
                    self.sent_at = self.sent_activity = now
        last = self._last_progress()
        if self.metrics is not None and self.progress.step >= 0:
            self.metrics.progress(self.progress.step, self.progress.at)
        due = force or now - self.sent_at >= self.config.heartbeat_seconds
        if last > self.sent_activity and due and \
                self.sink.heartbeat(datetime.fromtimestamp(last, UTC_ZONE)):
            self.sent_at, self.sent_activity = now, last


class _NullSink:
    def heartbeat(self, when: datetime) -> bool:
        return True

    def checkpoint(self, path: str, step: int, when: datetime) -> bool:
        return True

    def resumed(self, path: str, step: int, attempt: int, when: datetime) -> bool:
        return True


def run_launch(config: LaunchConfig, command: list[str], sink: Sink | None = None) -> int:
    """Run `command` to completion while reporting; return its exit code."""
    owned = sink is None
    if sink is None:
        sink = ApiSink(config.namespace or "", config.job or "", config.kubeconfig) \
            if config.reports else _NullSink()
    pattern = compile_step_pattern(config.step_pattern) if config.step_pattern else None
    heartbeat_file = Path(tempfile.gettempdir()) / f"trainmaster-heartbeat-{os.getpid()}"
    progress_file = Path(os.environ.get(PROGRESS_FILE_ENV) or
                         Path(tempfile.gettempdir()) / f"trainmaster-progress-{os.getpid()}")
    start = plan_start(command, os.environ, config.checkpoint_dir)
    print_notes(start)
    command = start.command
    rails = rail_env(start.env, interface_addresses(), has_rdma_devices())
    if rails:
        print("trainmaster launch: collectives over the rails: "
              + ", ".join(f"{k}={v}" for k, v in sorted(rails.items())), file=sys.stderr)
    env = {**start.env, **rails, HEARTBEAT_FILE_ENV: str(heartbeat_file),
           PROGRESS_FILE_ENV: str(progress_file)}
    try:
        child = subprocess.Popen(command, stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                                 env=env)
    except OSError as exc:
        print(f"trainmaster launch: cannot run {command[0]}: {exc.strerror or exc}",
              file=sys.stderr)
        return 127
    progress = Progress(pattern)
    assert child.stdout is not None and child.stderr is not None
    pumps = [
        threading.Thread(target=_forward,
                         args=(child.stdout, sys.stdout.buffer, LineFeed(progress)), daemon=True),
        threading.Thread(target=_forward,
                         args=(child.stderr, sys.stderr.buffer, LineFeed(progress)), daemon=True),
    ]
    for pump in pumps:
        pump.start()
    restore = _pass_signals(child)
    metrics = _serve_metrics(config)
    reports = _Reports(config, sink, progress, heartbeat_file, progress_file, metrics)
    if start.resumed is not None:
        reports.resumed(*start.resumed)
    try:
        reports.tick(force=True)  # started: the first sign of life
        while child.poll() is None:
            time.sleep(config.poll_seconds)
            reports.tick()
        for pump in pumps:
            pump.join(5)
        # A checkpoint finished just before exit still counts: one look to note what is on
        # disk (a busy node may not have looked since it was written), then the final one.
        reports.tick()
        reports.tick(force=True)  # a checkpoint finished just before exit still counts
    finally:
        restore()
        heartbeat_file.unlink(missing_ok=True)
        if metrics is not None:
            metrics.close()
        if owned and isinstance(sink, ApiSink):
            sink.close()
        if child.poll() is None:
            child.kill()
            child.wait()
    code = child.returncode
    return 128 - code if code < 0 else code


def _serve_metrics(config: LaunchConfig) -> LaunchMetrics | None:
    if config.metrics_port is None:
        return None
    metrics = LaunchMetrics(config.job or "", config.rank, config.attempt)
    try:
        metrics.serve(config.metrics_port, config.metrics_address)
    except OSError as exc:  # metrics must never stop training
        print(f"trainmaster launch: cannot serve metrics on {config.metrics_address}:"
              f"{config.metrics_port}: {exc.strerror or exc}", file=sys.stderr, flush=True)
        return None
    return metrics


def _pass_signals(child: subprocess.Popen[bytes]) -> Any:
    """Forward the pod's signals to the command; returns a function restoring handlers."""
    if threading.current_thread() is not threading.main_thread():
        return lambda: None

    def forward(signum: int, _: FrameType | None) -> None:
        if child.poll() is None:
            child.send_signal(signum)

    old = {sig: signal.signal(sig, forward) for sig in FORWARDED}

    def restore() -> None:
        for sig, handler in old.items():
            signal.signal(sig, handler)

    return restore
