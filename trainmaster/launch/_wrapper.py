"""`trainmaster launch -- CMD`: run the training command and report for it.

The wrapper is transparent: the command's stdout and stderr pass through unchanged, the
signals the pod gets (SIGTERM on deletion, SIGINT) are passed on, and it exits with the
command's exit code (128+N when killed by signal N), which is what the operator's
retryable-exit-code policy reads.

Progress it reports as a heartbeat, at most every --heartbeat-seconds:
- output: any bytes the command writes (a training loop that logs is alive);
- $TRAINMASTER_HEARTBEAT_FILE: a file the command may touch, for quiet programs;
- a completed checkpoint (see _checkpoints).
Only rank 0 reports by default ($RANK when torchrun runs the wrapper, else the pod's
JOB_COMPLETION_INDEX): ranks of one gang progress together, and one writer keeps the API
load flat however large the gang.
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
from datetime import UTC, datetime
from pathlib import Path
from types import FrameType
from typing import IO, Any

from trainmaster.launch._checkpoints import CheckpointWatcher, Found
from trainmaster.launch._reporter import ApiSink, Sink

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
        values: dict[str, Any] = {
            "job": env.get("TRAINMASTER_JOB") or None,
            "namespace": env.get("TRAINMASTER_NAMESPACE") or None,
            "rank": int(rank) if rank.isdigit() else None,
            "checkpoint_dir": Path(ckpt) if ckpt else None,
            "kubeconfig": Path(kubeconfig.split(os.pathsep)[0]) if kubeconfig else None,
        }
        values.update({k: v for k, v in options.items() if v is not None})
        return cls(**values)

    @property
    def reports(self) -> bool:
        return bool(self.job and self.namespace) and (self.all_ranks or self.rank in (None, 0))


class _Activity:
    """Wall-clock time of the command's last output (written by the forwarder threads)."""

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self.last = time.time()

    def touch(self) -> None:
        with self._lock:
            self.last = time.time()


def _forward(source: IO[bytes], target: IO[bytes], activity: _Activity) -> None:
    fd = source.fileno()
    while True:
        chunk = os.read(fd, 65536)
        if not chunk:
            return
        activity.touch()
        try:
            target.write(chunk)
            target.flush()
        except (BrokenPipeError, ValueError):
            pass  # nobody reads our output any more; keep draining so the child never blocks


class _Reports:
    """What to report on each tick, given the watcher, the activity and what was sent."""

    def __init__(self, config: LaunchConfig, sink: Sink, activity: _Activity,
                 heartbeat_file: Path) -> None:
        self.config = config
        self.sink = sink
        self.activity = activity
        self.heartbeat_file = heartbeat_file
        self.watcher = (CheckpointWatcher(config.checkpoint_dir, config.settle_seconds)
                        if config.checkpoint_dir is not None else None)
        self.pending: Found | None = None
        self.sent_at = 0.0
        self.sent_activity = 0.0

    def _last_activity(self) -> float:
        try:
            touched = self.heartbeat_file.stat().st_mtime
        except OSError:
            touched = 0.0
        return max(self.activity.last, touched)

    def tick(self, force: bool = False) -> None:
        now = time.time()
        if self.watcher is not None:
            self.pending = self.watcher.poll() or self.pending
            if self.pending is not None:
                found = self.pending
                when = datetime.fromtimestamp(now, UTC)
                if self.sink.checkpoint(str(found.path), found.step, when):
                    self.pending = None
                    self.sent_at = self.sent_activity = now
        last = self._last_activity()
        due = force or now - self.sent_at >= self.config.heartbeat_seconds
        if last > self.sent_activity and due and \
                self.sink.heartbeat(datetime.fromtimestamp(last, UTC)):
            self.sent_at, self.sent_activity = now, last


class _NullSink:
    def heartbeat(self, when: datetime) -> bool:
        return True

    def checkpoint(self, path: str, step: int, when: datetime) -> bool:
        return True


def run_launch(config: LaunchConfig, command: list[str], sink: Sink | None = None) -> int:
    """Run `command` to completion while reporting; return its exit code."""
    owned = sink is None
    if sink is None:
        sink = ApiSink(config.namespace or "", config.job or "", config.kubeconfig) \
            if config.reports else _NullSink()
    heartbeat_file = Path(tempfile.gettempdir()) / f"trainmaster-heartbeat-{os.getpid()}"
    env = {**os.environ, HEARTBEAT_FILE_ENV: str(heartbeat_file)}
    try:
        child = subprocess.Popen(command, stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                                 env=env)
    except OSError as exc:
        print(f"trainmaster launch: cannot run {command[0]}: {exc.strerror or exc}",
              file=sys.stderr)
        return 127
    activity = _Activity()
    assert child.stdout is not None and child.stderr is not None
    pumps = [
        threading.Thread(target=_forward, args=(child.stdout, sys.stdout.buffer, activity),
                         daemon=True),
        threading.Thread(target=_forward, args=(child.stderr, sys.stderr.buffer, activity),
                         daemon=True),
    ]
    for pump in pumps:
        pump.start()
    restore = _pass_signals(child)
    reports = _Reports(config, sink, activity, heartbeat_file)
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
        if owned and isinstance(sink, ApiSink):
            sink.close()
        if child.poll() is None:
            child.kill()
            child.wait()
    code = child.returncode
    return 128 - code if code < 0 else code


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
