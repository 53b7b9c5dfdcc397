"""Two processes that need the same family build it once: the second waits for the first."""

from __future__ import annotations

import subprocess
import sys
import time
from pathlib import Path

import pytest

from trainmaster.toolchain import _build

HOLD = """
import sys, time
from trainmaster.toolchain import _build
with _build._family_lock("etcd"):
    print("locked", flush=True)
    time.sleep(float(sys.argv[1]))
"""


def test_a_second_builder_waits_for_the_first(tmp_path: Path,
                                              monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("TRAINMASTER_CACHE", str(tmp_path))
    holder = subprocess.Popen([sys.executable, "-c", HOLD, "1.5"], stdout=subprocess.PIPE,
                              text=True)
    assert holder.stdout is not None
    assert holder.stdout.readline().strip() == "locked"
    started = time.monotonic()
    with _build._family_lock("etcd"):
        waited = time.monotonic() - started
    holder.wait(timeout=10)
    assert waited > 0.5, f"the lock was taken after {waited:.2f}s while another process held it"


def test_other_families_do_not_wait(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("TRAINMASTER_CACHE", str(tmp_path))
    holder = subprocess.Popen([sys.executable, "-c", HOLD, "3"], stdout=subprocess.PIPE,
                              text=True)
    assert holder.stdout is not None
    holder.stdout.readline()
    started = time.monotonic()
    with _build._family_lock("kwok"):
        waited = time.monotonic() - started
    holder.kill()
    holder.wait()
    assert waited < 1.0
