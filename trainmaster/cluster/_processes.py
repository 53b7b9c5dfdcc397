"""Start, probe and stop the control plane's processes.

Each process runs in its own session (process group) with output in a log file, so that
`stop` can end it and anything it forked, and a dead process can be explained by the tail
of its log.
"""

from __future__ import annotations

import contextlib
import os
import random
import signal
import socket
import subprocess
import time
from collections.abc import Callable
from pathlib import Path

from trainmaster import polling, procstat
from trainmaster.errors import TrainmasterError


class ClusterError(TrainmasterError):
    """The local control plane could not start, stop or answer."""


def _ephemeral_range() -> tuple[int, int]:
    try:
        low, high = Path("/proc/sys/net/ipv4/ip_local_port_range").read_text().split()
        return int(low), int(high)
    except (OSError, ValueError):
        return 32768, 60999  # Linux's default


def free_port(host: str = "127.0.0.1") -> int:
    """A port free on `host` now, chosen outside the kernel's ephemeral range.

    A port the kernel hands out for bind(0) comes from the range it also gives every outgoing
    connection, so between this check and the server's own bind any client on the machine
    can take it (CI saw kube-apiserver fail with "address already in use"). Below that range
    only another listener can collide, and the random choice makes that unlikely.
    """
    low, high = _ephemeral_range()
    lowest, highest = (10000, low - 1) if low > 12000 else (high + 1, 65535)
    for _ in range(200):
        port = random.randint(lowest, highest)
        with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as sock:
            try:
                sock.bind((host, port))
            except OSError:
                continue
            return port
    raise ClusterError(f"no free TCP port on {host} between {lowest} and {highest}")


def port_in_use(port: int) -> bool:
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as sock:
        sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        try:
            sock.bind(("127.0.0.1", port))
        except OSError:
            return True
    return False


def log_tail(log: Path, lines: int = 12) -> str:
    try:
        text = log.read_text(errors="replace").splitlines()
    except OSError:
        return ""
    return "\n".join("    " + line for line in text[-lines:])


def start(
    name: str, argv: list[str], log: Path, env: dict[str, str] | None = None
) -> subprocess.Popen[bytes]:
    log.parent.mkdir(parents=True, exist_ok=True)
    with log.open("ab") as fh:
        return subprocess.Popen(
            argv,
            stdout=fh,
            stderr=subprocess.STDOUT,
            stdin=subprocess.DEVNULL,
            start_new_session=True,
            env={**os.environ, **(env or {})},
        )


def alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:
        return True
    # A zombie (exited, not yet reaped by its parent) counts as dead.
    return procstat.state(pid) not in (None, "Z")


def stop(pid: int, timeout: float = 10.0) -> None:
    """SIGTERM the process group, then SIGKILL whatever is left after timeout."""
    for sig in (signal.SIGTERM, signal.SIGKILL):
        with contextlib.suppress(ProcessLookupError, PermissionError):
            os.killpg(pid, sig)
        with contextlib.suppress(ProcessLookupError, PermissionError):
            os.kill(pid, sig)
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            with contextlib.suppress(ChildProcessError):
                os.waitpid(pid, os.WNOHANG)
            if not alive(pid):
                return
            time.sleep(0.05)


def wait_until(
    check: Callable[[], bool],
    what: str,
    timeout: float,
    proc: subprocess.Popen[bytes] | None = None,
    log: Path | None = None,
) -> None:
    """``polling.wait_until`` for a process: check() may fail while the process starts
    (connection refused, 503, ...); fail early if proc exits, with its log's tail."""

    def ready() -> bool:
        if proc is not None and proc.poll() is not None:
            tail = log_tail(log) if log else ""
            raise ClusterError(
                f"{what}: the process exited with code {proc.returncode}"
                + (f"; last lines of {log}:\n{tail}" if tail else "")
            )
        try:
            return bool(check())
        except Exception:  # not up yet
            return False

    try:
        polling.wait_until(ready, what, timeout, 0.1)
    except polling.WaitTimeout:
        tail = log_tail(log) if log else ""
        raise ClusterError(
            f"{what}: not ready after {timeout:.0f}s"
            + (f"; last lines of {log}:\n{tail}" if tail else "")
        ) from None
