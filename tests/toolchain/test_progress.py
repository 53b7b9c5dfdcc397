"""`trainmaster tools build` in a CI log: a line per tool as it starts, then progress."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest

from trainmaster.toolchain import ABOUT, RECIPES


def test_every_family_says_what_it_is_and_how_long_it_takes() -> None:
    assert set(ABOUT) == set(RECIPES)
    for about in ABOUT.values():
        low, high = about.cold_minutes
        assert 0 < low <= high and about.what


def test_a_build_says_what_it_builds_as_it_starts_when_output_is_not_a_terminal(
    tmp_path: Path,
) -> None:
    # A real build in an empty cache, with the module proxy off so that it fails at its
    # first download: what was printed before that is what a CI log shows at the start.
    env = {**os.environ, "TRAINMASTER_CACHE": str(tmp_path / "cache"),
           "GOMODCACHE": str(tmp_path / "mod"), "GOCACHE": str(tmp_path / "go-build"),
           "GOPROXY": "off", "GOPATH": str(tmp_path / "gopath")}
    proc = subprocess.run([sys.executable, "-m", "trainmaster", "tools", "build", "etcd"],
                          capture_output=True, text=True, env=env, timeout=300, check=False)
    assert proc.returncode == 1, proc.stderr
    # First the announcement (what, why, roughly how long), then the family's own line.
    announce, first = proc.stderr.splitlines()[:2]
    assert announce.startswith("building etcd from pinned Go modules") and "roughly" in announce
    recipe, about = RECIPES["etcd"], ABOUT["etcd"]
    assert first == (f"etcd {recipe.version}: building {about.what}; a cold build takes "
                     f"{about.duration()} on 2 cores")
    assert "building etcd" in proc.stderr and "failed" in proc.stderr
    assert "Traceback" not in proc.stderr


def test_without_a_terminal_progress_is_a_line_per_interval(
    monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str],
) -> None:
    from trainmaster.cli import _tools
    from trainmaster.toolchain import BuildResult

    def build(families: list[str], progress: object, started: object, jobs: int,
              finished: object, sources: object = None) -> list[BuildResult]:
        # The real builder's calls, in its order: started, packages as compiled, finished.
        assert callable(started) and callable(progress) and callable(finished)
        started("kwok")
        for done in (1, 2, 3):
            progress("kwok", done, 3)
        result = BuildResult("kwok", Path("/cache/kwok"), 4.0, cached=False)
        finished(result)
        return [result]

    monkeypatch.setattr(_tools, "build", build)
    monkeypatch.setattr(_tools, "PROGRESS_LINE_SECONDS", 0.0)
    _tools.build_with_progress(["kwok"])
    lines = capsys.readouterr().err.splitlines()
    assert lines[0].startswith(f"kwok {RECIPES['kwok'].version}: building kwok, simulated")
    version = RECIPES["kwok"].version
    assert [line for line in lines if "packages" in line] == [
        f"go build kwok {version}: {n}/3 packages (0s)" for n in (1, 2, 3)]
    assert lines[-1] == "kwok: built in 4s -> /cache/kwok"
