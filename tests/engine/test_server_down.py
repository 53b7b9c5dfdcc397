"""`trainmaster pulumi` as a new user meets it: with the API server down, one error line at
the end and exit 1, no traceback; an unsupported flag or a bad value is a usage error
(exit 2) before the engine starts. Through the installed entry point and the real engine
(the Pulumi CLI and provider that `trainmaster tools build` builds)."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest

from tests.cli.entry import down_kubeconfig
from tests.engine.conftest import _env
from tests.engine.kit import copy_project, output

pytestmark = pytest.mark.integration


def _pulumi(project: Path, env: dict[str, str], *args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run([sys.executable, "-m", "trainmaster", "pulumi", *args], cwd=project,
                          env=env, stdin=subprocess.DEVNULL, capture_output=True, text=True,
                          timeout=600, check=False)


def test_preview_with_the_server_down_ends_in_one_line(tmp_path: Path) -> None:
    env = _env(tmp_path)
    kubeconfig, server = down_kubeconfig(tmp_path / "kubeconfig")
    env["KUBECONFIG"] = str(kubeconfig)
    project = copy_project(tmp_path / "project")
    proc = _pulumi(project, env, "preview", "--stack", "dev")
    assert proc.returncode == 1, output(proc)
    assert "Traceback" not in proc.stdout + proc.stderr, output(proc)
    last = proc.stderr.strip().splitlines()[-1]
    # Before the engine runs, the cluster it is about to preview against is named.
    assert (f"trainmaster pulumi preview: context down, server {server} (kubeconfig "
            f"{kubeconfig}, from $KUBECONFIG)") in proc.stderr, output(proc)
    port = server.rsplit(":", 1)[-1]
    assert last.startswith("error: pulumi preview (stack dev): cannot check the cluster"), last
    assert f"127.0.0.1', {port})" in last or f"127.0.0.1:{port}" in last, last


@pytest.mark.parametrize("args", [
    ["preview", "--stack", "dev", "--kubeconfig", "k.yaml"],  # a flag it does not take
    ["up", "--stack", "dev", "--parallel", "many"],  # a bad value
], ids=["unsupported-flag", "bad-value"])
def test_a_bad_flag_is_a_usage_error(tmp_path: Path, args: list[str]) -> None:
    proc = _pulumi(copy_project(tmp_path / "project"), _env(tmp_path), *args)
    assert proc.returncode == 2, output(proc)
    assert "Traceback" not in proc.stderr and proc.stderr.startswith("error: pulumi "), output(proc)
