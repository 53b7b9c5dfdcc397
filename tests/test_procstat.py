"""trainmaster.procstat: /proc/<pid>/stat read from after comm's last parenthesis."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import time

import pytest

from trainmaster import procstat


def _wait_state(pid: int, want: str) -> str | None:
    deadline = time.monotonic() + 10
    found = procstat.state(pid)
    while found != want and time.monotonic() < deadline:
        time.sleep(0.02)
        found = procstat.state(pid)
    return found


def test_fields_count_from_the_last_parenthesis_of_comm() -> None:
    line = "77 (a) b) c) T 5 77 77 0 -1 0 0 0 0 0 12 34 0 0 20 0 1 0 9"
    after = procstat.fields(line)
    assert after[0] == "T" and after[1] == "5"
    assert procstat.cpu_of(line, 2) == pytest.approx(23.0)
    with pytest.raises(ValueError, match="not a /proc/<pid>/stat line"):
        procstat.fields("77 no parenthesis S 1")


def test_state_and_parent_of_a_live_stopped_and_reaped_child() -> None:
    child = subprocess.Popen([sys.executable, "-c", "import time; time.sleep(30)"])
    try:
        assert procstat.parent(child.pid) == os.getpid()
        assert _wait_state(child.pid, "S") == "S"
        os.kill(child.pid, signal.SIGSTOP)
        assert _wait_state(child.pid, "T") == "T"
        os.kill(child.pid, signal.SIGKILL)
        assert _wait_state(child.pid, "Z") == "Z"  # exited, not reaped yet
    finally:
        child.kill()
        child.wait()
    assert procstat.state(child.pid) is None and procstat.parent(child.pid) is None
    assert procstat.cpu_seconds(child.pid) is None
