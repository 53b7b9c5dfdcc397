"""Help never builds anything; a build says what, why and roughly how long before it
starts. Run with an empty tool cache (TRAINMASTER_CACHE), as on a fresh clone."""

from __future__ import annotations

import os
import signal
import subprocess
from pathlib import Path

import pytest

from tests.cli.entry import REPO, SCRIPTS, run


@pytest.mark.parametrize(
    "args",
    [["pulumi", "--help"], ["pulumi", "-h"], ["pulumi"], ["pulumi", "up", "--help"],
     ["pulumi", "stack", "ls", "-h"], ["tools", "env", "--help"], ["tools", "build", "-h"]],
    ids=lambda a: " ".join(a),
)
def test_help_builds_nothing(tmp_path: Path, args: list[str]) -> None:
    cache = tmp_path / "cache"
    proc = run(*args, env={"TRAINMASTER_CACHE": str(cache)}, timeout=60)
    assert proc.returncode == 0, proc.stderr
    assert "Usage: trainmaster" in proc.stdout
    assert "building" not in proc.stderr and "go build" not in proc.stderr
    assert not cache.exists() or not any(cache.rglob("*")), "help started a build"


def test_pulumi_help_says_how_to_get_pulumis_own_help(tmp_path: Path) -> None:
    proc = run("pulumi", "up", "--help", env={"TRAINMASTER_CACHE": str(tmp_path)})
    assert "`trainmaster tools build pulumi pulumi-kubernetes` (roughly" in proc.stdout


def test_a_build_is_announced_before_it_starts(tmp_path: Path) -> None:
    # `tools env` on a fresh clone builds the Pulumi toolchain: the first thing on stderr
    # (a pipe, not a terminal) says what, why and how long. The build is stopped there.
    proc = subprocess.Popen(
        [str(SCRIPTS / "trainmaster"), "tools", "env"], cwd=REPO, text=True,
        stdin=subprocess.DEVNULL, stdout=subprocess.PIPE, stderr=subprocess.PIPE,
        env={**os.environ, "TRAINMASTER_CACHE": str(tmp_path / "cache")},
        start_new_session=True,  # its go builds are in its process group: stopped with it
    )
    try:
        assert proc.stderr is not None
        first = proc.stderr.readline()
    finally:
        os.killpg(proc.pid, signal.SIGKILL)
        proc.wait(timeout=30)
        if proc.stdout is not None:
            proc.stdout.close()
        if proc.stderr is not None:
            proc.stderr.close()
    assert first.startswith("building pulumi, pulumi-kubernetes, pulumi-language-python "
                            "from pinned Go modules"), first
    assert "needed by `trainmaster tools env`" in first
    assert "roughly" in first and "minutes" in first


def test_the_rough_time_spreads_the_families_over_the_build_streams() -> None:
    # A new machine builds every family three at once: the announcement must not quote the
    # one-at-a-time sum (over 200 minutes for the demo's families; 29 measured).
    from trainmaster.cli._tools import rough_minutes
    from trainmaster.toolchain import ABOUT

    every = list(ABOUT)
    uppers = [ABOUT[f].cold_minutes[1] for f in every]
    assert rough_minutes(every, jobs=1) == sum(uppers)
    assert max(uppers) <= rough_minutes(every, jobs=3) == -(-sum(uppers) // 3) < sum(uppers)
    assert rough_minutes(["etcd"], jobs=3) == ABOUT["etcd"].cold_minutes[1]
    assert rough_minutes(["pulumi", "etcd"], jobs=3) == ABOUT["pulumi"].cold_minutes[1]
