"""trainmaster.engine without a cluster: flags, the project environment, policy launchers."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest

from tests.helpers import ROOT
from trainmaster.engine import (
    DEFAULT_PASSPHRASE,
    engine_env,
    find_project,
    operation_name,
    parse_operation,
)
from trainmaster.engine._policy import launcher_for
from trainmaster.errors import UsageError


def test_flags_as_a_user_types_them() -> None:
    op = parse_operation("up", ["--stack", "dev", "--yes", "--refresh", "--diff", "-t", "urn:a"])
    assert (op.stack, op.yes, op.refresh, op.diff, op.targets) == (
        "dev",
        True,
        True,
        True,
        ("urn:a",),
    )
    assert op.confirmed
    assert parse_operation("destroy", ["-s=dev", "--remove"]).remove
    assert not parse_operation("destroy", ["-s", "dev"]).confirmed
    assert parse_operation("preview", []).confirmed


def test_an_unsupported_flag_is_refused_not_dropped() -> None:
    with pytest.raises(UsageError, match=r"--exclude-protected; supported: --stack"):
        parse_operation("destroy", ["--stack", "dev", "--exclude-protected"])


def test_only_the_four_operations_run_inline() -> None:
    assert [operation_name(w) for w in ("preview", "up", "refresh", "destroy")] == [
        "preview",
        "up",
        "refresh",
        "destroy",
    ]
    assert operation_name("stack") is None


def test_environment_defaults(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    for name in ("PULUMI_BACKEND_URL", "PULUMI_CONFIG_PASSPHRASE", "KUBECONFIG"):
        monkeypatch.delenv(name, raising=False)
    monkeypatch.setenv("TRAINMASTER_HOME", str(tmp_path))
    monkeypatch.setenv("HOME", str(tmp_path / "home"))
    # kubectl's rule: ~/.kube/config (where `cluster up` adds its context), never a
    # local cluster's file picked behind the user's back.
    user = tmp_path / "home" / ".kube" / "config"
    user.parent.mkdir(parents=True)
    user.write_text("apiVersion: v1\nkind: Config\n")
    env = engine_env()
    assert env["PULUMI_HOME"] == str(tmp_path / "pulumi")
    assert env["PULUMI_BACKEND_URL"] == (tmp_path / "pulumi" / "state").as_uri()
    assert (tmp_path / "pulumi" / "state").is_dir()
    assert env["PULUMI_CONFIG_PASSPHRASE"] == DEFAULT_PASSPHRASE
    assert env["PULUMI_DISABLE_AUTOMATIC_PLUGIN_ACQUISITION"] == "true"
    assert env["KUBECONFIG"] == str(user)
    first = env["PATH"].split(os.pathsep)[:2]
    assert [Path(p).name.split("-v")[0] for p in first] == ["pulumi", "pulumi-kubernetes"]


def test_environment_keeps_what_the_user_set(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("TRAINMASTER_HOME", str(tmp_path))
    monkeypatch.setenv("PULUMI_BACKEND_URL", "file:///elsewhere")
    monkeypatch.setenv("PULUMI_CONFIG_PASSPHRASE", "mine")
    monkeypatch.setenv("KUBECONFIG", "/some/kubeconfig")
    env = engine_env()
    assert env["PULUMI_BACKEND_URL"] == "file:///elsewhere"
    assert env["PULUMI_CONFIG_PASSPHRASE"] == "mine"
    assert env["KUBECONFIG"] == "/some/kubeconfig"


def test_project_is_found_from_a_subfolder() -> None:
    assert find_project(ROOT / "stacks" / "dev") == ROOT


def test_python_pack_gets_an_executable_launcher(tmp_path: Path) -> None:
    launcher = launcher_for(ROOT / "policies", tmp_path)
    assert os.access(launcher, os.X_OK)
    text = launcher.read_text()
    assert f'-m pulumi.policy "$1" "{ROOT / "policies"}"' in text
    assert str(ROOT / ".venv" / "bin" / "python") in text  # the virtualenv of PulumiPolicy.yaml
    assert (launcher.parent / "PulumiPolicy.yaml").exists()  # the CLI reads the version there
    assert launcher_for(tmp_path, tmp_path) == tmp_path.resolve()  # not a pack: as given


def test_usage_errors_exit_1_without_a_traceback(tmp_path: Path) -> None:
    env = {**os.environ, "TRAINMASTER_HOME": str(tmp_path)}
    proc = subprocess.run(
        [sys.executable, "-m", "trainmaster", "pulumi", "up", "--stack", "dev"],
        cwd=ROOT,
        env=env,
        stdin=subprocess.DEVNULL,
        capture_output=True,
        text=True,
        check=False,
    )
    assert proc.returncode == 1
    assert proc.stderr == (
        "error: pulumi up: --yes or --skip-preview must be passed in to proceed "
        "when running in non-interactive mode\n"
    )
