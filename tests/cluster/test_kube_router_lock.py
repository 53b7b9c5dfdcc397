"""One cluster per host enforces NetworkPolicies (trainmaster/cluster/_kube_router.py): while
another cluster's kube-router holds the host's lock, `cluster up` starts none and says that
its real nodes are not enforced, naming the cluster that is. The lock is a real flock(1) held
by a process, on a file of the test's own (the host's lives in /run/trainmaster)."""

from __future__ import annotations

import contextlib
import os
import signal
import subprocess
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from trainmaster.cluster import _kube_router


@pytest.fixture
def lock(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    monkeypatch.setattr(_kube_router, "LOCK", tmp_path / "kube-router.lock")
    monkeypatch.setattr(_kube_router, "OWNER", tmp_path / "kube-router.owner")
    monkeypatch.setattr(_kube_router, "missing", lambda: None)  # tools: not what is tested
    return tmp_path / "kube-router.lock"


@pytest.fixture
def held(lock: Path) -> Iterator[subprocess.Popen[bytes]]:
    """Another cluster's kube-router: flock(1) holding the lock while its command runs."""
    proc = subprocess.Popen(["flock", "--nonblock", str(lock), "sleep", "60"],
                            start_new_session=True)
    deadline = time.monotonic() + 30
    while _kube_router.holder() is None and time.monotonic() < deadline:
        time.sleep(0.05)
    assert _kube_router.holder() is not None, "flock(1) did not take the lock in 30 s"
    _kube_router.OWNER.write_text("/state/of/other\n")
    yield proc
    _stop(proc)


def _stop(proc: subprocess.Popen[bytes]) -> None:
    # As `cluster down` stops it: the whole group (flock(1) and the command that inherits
    # its lock).
    with contextlib.suppress(ProcessLookupError):
        os.killpg(proc.pid, signal.SIGKILL)
    proc.wait()


def _no_launch(name: str, argv: list[str], ports: list[int]) -> tuple[Any, Path]:
    raise AssertionError(f"{name} must not start while another cluster enforces")


def test_a_free_lock_has_no_holder(lock: Path) -> None:
    assert _kube_router.holder() is None
    lock.touch()
    assert _kube_router.holder() is None


def test_a_second_cluster_runs_without_enforcement_and_says_so(
        held: subprocess.Popen[bytes], tmp_path: Path) -> None:
    said: list[str] = []
    enforced = _kube_router.start(kubeconfig=tmp_path / "kubeconfig", state_dir=tmp_path,
                                  node="leaf-0-node-0", launch=_no_launch, report=said.append)
    assert enforced is False
    assert said == ["WARNING: NetworkPolicies are NOT enforced on this cluster's real nodes: "
                    "kube-router already enforces for the cluster at /state/of/other "
                    "(one per host)"]
    assert not _kube_router.enforcing(tmp_path)
    # Its `down` removes nothing of the other cluster's.
    assert _kube_router.cleanup(tmp_path) == []
    assert _kube_router.LOCK.exists() and _kube_router.holder() == "/state/of/other"


def test_the_lock_is_free_once_its_process_is_gone(held: subprocess.Popen[bytes]) -> None:
    assert _kube_router.holder() == "/state/of/other"
    _stop(held)
    # The command's exit (which closes its copy of the lock) may trail flock(1)'s a moment.
    deadline = time.monotonic() + 10
    while _kube_router.holder() is not None and time.monotonic() < deadline:
        time.sleep(0.05)
    assert _kube_router.holder() is None
