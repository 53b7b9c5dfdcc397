"""The launcher bundle runs on a bare Python (no trainmaster, no dependencies), as in a
training image: it passes the command through, reads its steps, serves the metrics."""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
import time
import urllib.request
from pathlib import Path

import pytest

from trainmaster.cluster import free_port
from trainmaster.launch import BUNDLE_NAME, METRIC_NAMES, write_bundle

BARE = shutil.which("python3", path="/usr/bin:/bin") or sys.executable


def _scrape(port: int) -> str:
    with urllib.request.urlopen(f"http://127.0.0.1:{port}/metrics", timeout=5) as r:
        return str(r.read().decode())


def test_the_bundle_runs_without_trainmaster(tmp_path: Path) -> None:
    bundle = write_bundle(tmp_path / "launcher")
    assert bundle.name == BUNDLE_NAME
    port = free_port()
    env = {"PATH": "/usr/bin:/bin", "TRAINMASTER_JOB": "gpt", "JOB_COMPLETION_INDEX": "0",
           "TRAINMASTER_METRICS_PORT": str(port), "TRAINMASTER_RESTART": "2"}
    # -I: no user site, no PYTHONPATH: nothing but the bundle and the standard library.
    proc = subprocess.Popen(
        [BARE, "-I", str(bundle), "--", BARE, "-I", "-c",
         "import time, sys\nprint('step 7 loss 1.0', flush=True)\n"
         "sys.stdin.readline()\nsys.exit(4)"],
        env=env, cwd=tmp_path, stdin=subprocess.PIPE, stdout=subprocess.PIPE,
        stderr=subprocess.PIPE, text=True)
    try:
        assert proc.stdout is not None and proc.stdin is not None
        assert proc.stdout.readline().strip() == "step 7 loss 1.0"
        deadline = time.time() + 20
        text = ""
        while time.time() < deadline:
            try:
                text = _scrape(port)
            except OSError:
                text = ""
            if 'trainmaster_job_step{rank="0",trainingjob="gpt"} 7.0' in text:
                break
            time.sleep(0.2)
        assert 'trainmaster_job_step{rank="0",trainingjob="gpt"} 7.0' in text, text
        assert 'trainmaster_job_attempt{rank="0",trainingjob="gpt"} 2.0' in text
        for name in METRIC_NAMES:
            assert f"# TYPE {name} gauge" in text
        proc.stdin.write("\n")
        proc.stdin.flush()
        assert proc.wait(30) == 4
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.wait()
    assert "Traceback" not in (proc.stderr.read() if proc.stderr else "")


@pytest.mark.parametrize(("args", "message"), [
    ([], "give the command to run after --"),
    (["--step-pattern", r"step \d+", "--", "true"], "no group"),
])
def test_bad_bundle_usage_exits_2(tmp_path: Path, args: list[str], message: str) -> None:
    bundle = write_bundle(tmp_path)
    result = subprocess.run([BARE, "-I", str(bundle), *args], capture_output=True, text=True,
                            env={"PATH": os.environ.get("PATH", "/usr/bin")}, timeout=60)
    assert result.returncode == 2
    assert message in result.stderr and "Traceback" not in result.stderr


def test_ranks_of_the_bundle_resume_from_the_same_newer_checkpoint(tmp_path: Path) -> None:
    """Four launcher processes of one gang (the bundle, on a bare Python, as in the
    training image) start while the old gang completes checkpoints: each starts its
    command from the same checkpoint, newer than TRAINMASTER_RESUME_FROM."""
    bundle = write_bundle(tmp_path / "launcher")
    ckpt = tmp_path / "ckpt"

    def complete(step: int) -> None:
        (ckpt / f"step-{step}").mkdir(parents=True)
        (ckpt / f"step-{step}" / "COMPLETE").touch()

    complete(220)
    complete(240)
    reported = str(ckpt / "step-220")
    show = "import os, sys; print(sys.argv[1:], os.environ['TRAINMASTER_RESUME_FROM'])"
    procs = []
    for rank in range(4):
        env = {"PATH": "/usr/bin:/bin", "TRAINMASTER_JOB": "gpt", "TRAINMASTER_RESTART": "1",
               "JOB_COMPLETION_INDEX": str(rank), "TRAINMASTER_GANG_UID": "uid-7",
               "TRAINMASTER_CHECKPOINT_DIR": str(ckpt), "TRAINMASTER_RESUME_FROM": reported,
               "TRAINMASTER_RESUME_ARGS": f"--resume-from {reported}",
               "TRAINMASTER_RESUME_TEMPLATE": "--resume-from {path}"}
        procs.append(subprocess.Popen(
            [BARE, "-I", str(bundle), "--", BARE, "-I", "-c", show, "--resume-from", reported],
            env=env, cwd=tmp_path, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True))
        complete(260 + 20 * rank)  # completes while the ranks start
    outputs = [p.communicate(timeout=60) for p in procs]
    assert [p.returncode for p in procs] == [0] * 4
    lines = {out.strip() for out, _ in outputs}
    assert len(lines) == 1, outputs
    (line,) = lines
    chosen = line.split()[-1]
    assert chosen != reported and line.startswith(f"['--resume-from', '{chosen}']")
    assert all(f"resuming from {chosen}" in err and "Traceback" not in err
               for _, err in outputs)
