"""Usage errors through the installed entry points: exit 2, one line on stderr, no traceback,
whichever way the installed typer packages click. Bad input still exits 1."""

from __future__ import annotations

import os
import subprocess
import sysconfig
from pathlib import Path

import pytest

from tests.helpers import stack_doc, write_spec

# The console scripts the install put next to this interpreter (.venv/bin).
SCRIPTS = Path(sysconfig.get_path("scripts"))


def run(
    script: str, *args: str, env: dict[str, str] | None = None
) -> subprocess.CompletedProcess[str]:
    exe = SCRIPTS / script
    assert exe.is_file(), f"{exe} is not installed (make .venv/.installed)"
    return subprocess.run(
        [str(exe), *args], capture_output=True, text=True, timeout=180, stdin=subprocess.DEVNULL,
        env=env,
    )


@pytest.mark.parametrize(
    ("script", "args", "needle"),
    [
        ("trainmaster", ["validate", "--bogus"], "No such option: --bogus"),
        ("trainmaster", ["nosuch"], "No such command 'nosuch'"),
        ("trainmaster", ["tools", "nosuch"], "No such command 'nosuch'"),
        ("trainmaster", ["validate"], "Missing argument"),
        ("trainmaster-scheduler", ["--bogus"], "unrecognized arguments: --bogus"),
        ("trainmaster-scheduler", ["--metrics-port", "x"], "invalid int value: 'x'"),
        ("trainmaster", ["bench", "recovery", "--real", "--torch"],
         "give one of --real and --torch"),
        ("trainmaster", ["bench", "recovery", "--backoff", "0"],
         "give --backoff (>= 0) with --real"),
    ],
    ids=["option", "command", "subcommand", "missing-argument", "scheduler-option",
         "scheduler-value", "bench-real-and-torch", "bench-backoff-without-real"],
)
def test_usage_error_is_one_line_and_exits_2(script: str, args: list[str], needle: str) -> None:
    proc = run(script, *args)
    assert proc.returncode == 2, proc.stderr
    assert "Traceback" not in proc.stderr
    (line,) = proc.stderr.strip().splitlines()
    assert line.startswith("error: ")
    assert needle in line
    # The hint names the command whose help to read.
    command = " ".join([script, *args[:1]]) if args[:1] == ["tools"] else script
    assert f"see '{command}" in line and "--help'" in line
    assert proc.stdout == ""


def test_no_command_shows_the_help_without_traceback() -> None:
    proc = run("trainmaster")
    assert proc.returncode in (0, 2), proc.stderr
    assert "Traceback" not in proc.stderr
    out = proc.stdout + proc.stderr
    assert "validate" in out and "cluster" in out


def test_help_exits_0() -> None:
    for script, args in (("trainmaster", ["validate", "--help"]),
                         ("trainmaster-scheduler", ["--help"])):
        proc = run(script, *args)
        assert proc.returncode == 0, proc.stderr
        assert "--" in proc.stdout and proc.stderr == ""


def test_invalid_spec_still_exits_1(tmp_path: Path) -> None:
    doc = stack_doc()
    doc["jobs"][1]["gpusPerPod"] = 16
    proc = run("trainmaster", "validate", str(write_spec(tmp_path / "bad.yaml", doc)))
    assert proc.returncode == 1, proc.stderr
    assert "jobs[1].gpusPerPod: 16 is more than the 8 GPUs per node" in proc.stderr
    assert "Traceback" not in proc.stderr


def test_scheduler_without_a_kubeconfig_exits_1(tmp_path: Path) -> None:
    env = {k: v for k, v in os.environ.items() if not k.startswith("KUBERNETES_")}
    env |= {"HOME": str(tmp_path), "KUBECONFIG": str(tmp_path / "missing"),
            "TRAINMASTER_HOME": str(tmp_path / "home")}
    proc = run("trainmaster-scheduler", "--metrics-port", "0", "--no-leader-elect", env=env)
    assert proc.returncode == 1, proc.stderr
    assert "Traceback" not in proc.stderr
    assert "error: no usable kubeconfig" in proc.stderr
