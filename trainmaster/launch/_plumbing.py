"""What every `trainmaster launch` shares, rigid or elastic: the command's output passed
through (and read for steps), the reports to the TrainingJob on each tick, the pod's
signals passed on, and the metrics server. Standard library only (launcher bundle)."""

from __future__ import annotations

import os
import signal
import sys
import threading
import time
from collections.abc import Callable
from datetime import datetime
from pathlib import Path
from types import FrameType
from typing import IO, TYPE_CHECKING, Any

from trainmaster.api import UTC as UTC_ZONE
from trainmaster.launch._checkpoints import CheckpointWatcher, Found
from trainmaster.launch._config import LaunchConfig
from trainmaster.launch._metrics import LaunchMetrics
from trainmaster.launch._progress import LineFeed, Progress
from trainmaster.launch._reporter import Sink

if TYPE_CHECKING:
    import subprocess


FORWARDED = (signal.SIGTERM, signal.SIGINT, signal.SIGHUP, signal.SIGUSR1, signal.SIGUSR2)


def forward_output(source: IO[bytes], target: IO[bytes], lines: LineFeed) -> None:
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


class Reports:
    """What to report on each tick, given the watcher, the progress and what was sent."""

    def __init__(self, config: LaunchConfig, sink: Sink, progress: Progress,
                 heartbeat_file: Path, progress_file: Path,
                 metrics: LaunchMetrics | None = None, *, restarting: bool = False,
                 started: float | None = None) -> None:
        self.config = config
        self.sink = sink
        self.progress = progress
        self.heartbeat_file = heartbeat_file
        self.progress_file = progress_file
        self.metrics = metrics
        # The start is the first sign of life: the launcher's own start when given.
        self.started = time.time() if started is None else started
        # An attempt resuming from a checkpoint reports once how long it took to get from
        # the start to its first step (loading included): the price of a restart.
        self.restart_pending = restarting
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
        # A step from before the start (a progress file left by the last attempt) is not it.
        if self.restart_pending and self.progress.step >= 0 and \
                self.progress.at >= self.started:
            self._report_restart()
        if self.metrics is not None and self.progress.step >= 0:
            self.metrics.progress(self.progress.step, self.progress.at)
        due = force or now - self.sent_at >= self.config.heartbeat_seconds
        if last > self.sent_activity and due and \
                self.sink.heartbeat(datetime.fromtimestamp(last, UTC_ZONE)):
            self.sent_at, self.sent_activity = now, last


    def _report_restart(self) -> None:
        seconds = self.progress.at - self.started
        when = datetime.fromtimestamp(self.progress.at, UTC_ZONE)
        if self.sink.restarted(seconds, self.config.attempt, when):
            self.restart_pending = False


class NullSink:
    def heartbeat(self, when: datetime) -> bool:
        return True

    def checkpoint(self, path: str, step: int, when: datetime) -> bool:
        return True

    def resumed(self, path: str, step: int, attempt: int, when: datetime) -> bool:
        return True

    def restarted(self, seconds: float, attempt: int, when: datetime) -> bool:
        return True



def serve_metrics(config: LaunchConfig) -> LaunchMetrics | None:
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


def pass_signals(current: Callable[[], subprocess.Popen[bytes] | None]) -> Any:
    """Forward the pod's signals to the command `current()` returns (an elastic launcher
    starts one per round); returns a function restoring handlers."""
    if threading.current_thread() is not threading.main_thread():
        return lambda: None

    def forward(signum: int, _: FrameType | None) -> None:
        child = current()
        if child is not None and child.poll() is None:
            child.send_signal(signum)

    old = {sig: signal.signal(sig, forward) for sig in FORWARDED}

    def restore() -> None:
        for sig, handler in old.items():
            signal.signal(sig, handler)

    return restore
