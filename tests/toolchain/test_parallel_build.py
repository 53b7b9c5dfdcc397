"""`trainmaster tools build` builds several families at once, the longest first, and fails
only after every build it started has ended."""

from __future__ import annotations

import threading
import time
from pathlib import Path

import pytest

from trainmaster.toolchain import ABOUT, BuildResult, ToolchainError, _build

FAMILIES = ["etcd", "pulumi-kubernetes", "kwok", "k8s", "cni-plugins"]


class _Recorder:
    def __init__(self, fail: str | None = None) -> None:
        self.lock = threading.Lock()
        self.running = 0
        self.most = 0
        self.order: list[str] = []
        self.ended: list[str] = []
        self.fail = fail

    def __call__(self, recipe: _build.Recipe, progress: object, started: object,
                 sources: object = None) -> BuildResult:
        with self.lock:
            self.order.append(recipe.family)
            self.running += 1
            self.most = max(self.most, self.running)
        time.sleep(0.2)
        with self.lock:
            self.running -= 1
            self.ended.append(recipe.family)
        if recipe.family == self.fail:
            raise ToolchainError(f"{recipe.family}: go build failed")
        return BuildResult(recipe.family, Path("/nowhere") / recipe.family, 0.2, False)


def test_families_build_at_once_longest_first(monkeypatch: pytest.MonkeyPatch) -> None:
    recorder = _Recorder()
    monkeypatch.setattr(_build, "_build_family", recorder)
    done: list[str] = []
    results = _build.build(FAMILIES, jobs=3, finished=lambda r: done.append(r.family))
    assert [r.family for r in results] == FAMILIES  # the caller's order
    assert recorder.most == 3
    longest = sorted(FAMILIES, key=lambda f: -sum(ABOUT[f].cold_minutes))
    assert recorder.order[:3] == longest[:3]
    assert sorted(done) == sorted(FAMILIES)


def test_one_job_builds_in_order(monkeypatch: pytest.MonkeyPatch) -> None:
    recorder = _Recorder()
    monkeypatch.setattr(_build, "_build_family", recorder)
    _build.build(FAMILIES[:3], jobs=1)
    assert recorder.order == FAMILIES[:3] and recorder.most == 1


def test_a_failure_is_raised_after_every_build_ended(monkeypatch: pytest.MonkeyPatch) -> None:
    recorder = _Recorder(fail="pulumi-kubernetes")
    monkeypatch.setattr(_build, "_build_family", recorder)
    with pytest.raises(ToolchainError, match="pulumi-kubernetes"):
        _build.build(FAMILIES, jobs=2)
    assert sorted(recorder.ended) == sorted(FAMILIES)
    assert recorder.running == 0
