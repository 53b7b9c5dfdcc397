"""Run the installed console scripts (.venv/bin) as a user does: a process, its exit code,
its stdout and stderr, stdin closed unless given."""

from __future__ import annotations

import os
import re
import subprocess
import sysconfig
from pathlib import Path

from trainmaster.cluster import free_port

SCRIPTS = Path(sysconfig.get_path("scripts"))
REPO = Path(__file__).resolve().parents[2]


def run(*args: str, script: str = "trainmaster", stdin: str | None = None,
        env: dict[str, str] | None = None, cwd: Path | None = None,
        timeout: float = 180) -> subprocess.CompletedProcess[str]:
    exe = SCRIPTS / script
    assert exe.is_file(), f"{exe} is not installed (make .venv/.installed)"
    return subprocess.run(
        [str(exe), *args], capture_output=True, text=True, timeout=timeout,
        input=stdin, stdin=None if stdin is not None else subprocess.DEVNULL,
        env={**os.environ, **(env or {})}, cwd=cwd or REPO,
    )


def closed_port() -> int:
    """A loopback port nothing listens on: connecting to it is refused at once."""
    return free_port()


def down_kubeconfig(path: Path) -> tuple[Path, str]:
    """A kubeconfig whose server refuses connections; (file, server URL)."""
    server = f"https://127.0.0.1:{closed_port()}"
    path.write_text(
        "apiVersion: v1\nkind: Config\n"
        f"clusters: [{{name: c, cluster: {{server: '{server}',"
        " insecure-skip-tls-verify: true}}]\n"
        "users: [{name: u, user: {token: t}}]\n"
        "contexts: [{name: down, context: {cluster: c, user: u}}]\n"
        "current-context: down\n"
    )
    return path, server


TARGET_LINE = re.compile(r"^trainmaster [a-z][a-z -]*: (context \S+|no context|kubeconfig "
                         r"\S+|in-cluster service account)")
"""The line every command that talks to a cluster starts with: the cluster it uses."""


def target_line(proc: subprocess.CompletedProcess[str]) -> str | None:
    """The line naming the cluster a command talked to, if it printed one."""
    return next((line for line in proc.stderr.splitlines() if TARGET_LINE.match(line)), None)


def assert_one_error_line(proc: subprocess.CompletedProcess[str], code: int) -> str:
    """The run failed with `code` and said why in one line, without a traceback (after
    the line naming the cluster, for a command that talks to one)."""
    assert proc.returncode == code, (proc.returncode, proc.stderr)
    assert "Traceback" not in proc.stderr, proc.stderr
    lines = [line for line in proc.stderr.splitlines()
             if line.strip() and not TARGET_LINE.match(line)]
    assert len(lines) == 1, proc.stderr
    assert lines[0].startswith("error: "), lines[0]
    return lines[0]
