"""Every command's help shows what a user types (`--nodes INTEGER`, `FILE...`, a bare
flag), never Python types (`<bool>`, `<list[Path]>`) or parameter names in braces; every
command takes -h, and --context wherever it takes --kubeconfig. In process (typer's
CliRunner): this is about the text, not the process."""

from __future__ import annotations

import re
from pathlib import Path
from typing import Any

import pytest
import typer
import yaml
from typer.testing import CliRunner

from trainmaster.cli import app

# `cluster` commands take --kubeconfig to name a local cluster (the one whose kubeconfig
# it is), not to reach a server through a context.
LOCAL_CLUSTER_GROUP = "cluster"


def _commands() -> list[tuple[list[str], Any]]:
    out: list[tuple[list[str], Any]] = []

    def walk(command: Any, path: list[str]) -> None:
        out.append((path, command))
        for name, sub in sorted(getattr(command, "commands", {}).items()):
            walk(sub, [*path, name])

    walk(typer.main.get_command(app), [])
    return out


COMMANDS = _commands()


@pytest.mark.parametrize(("path", "command"), COMMANDS,
                         ids=[" ".join(p) or "trainmaster" for p, _ in COMMANDS])
def test_help_shows_what_a_user_types(path: list[str], command: Any) -> None:
    result = CliRunner().invoke(app, [*path, "-h"], prog_name="trainmaster", terminal_width=200)
    assert result.exit_code == 0, result.output
    assert "Usage: trainmaster" in result.output
    internal = re.findall(r"<(?:bool|int|float|str|path|list\[[^\]]*\])>|\{[a-z_]+\}",
                          result.output)
    assert internal == [], f"`trainmaster {' '.join(path)} -h` shows {internal}"


@pytest.mark.parametrize(("path", "command"), COMMANDS,
                         ids=[" ".join(p) or "trainmaster" for p, _ in COMMANDS])
def test_context_goes_with_kubeconfig(path: list[str], command: Any) -> None:
    options = {opt for param in getattr(command, "params", []) for opt in param.opts}
    if "--kubeconfig" in options and path[:1] != [LOCAL_CLUSTER_GROUP]:
        assert "--context" in options, f"`trainmaster {' '.join(path)}`"


def test_a_context_for_processes_is_a_private_copy(tmp_path: Path) -> None:
    # Benchmarks hand the kubeconfig file to schedulers they start: --context becomes a
    # copy whose current-context is the one asked for, with its relative paths resolved.
    from trainmaster.cli._app import kubeconfig_for_context
    from trainmaster.kubeclient import KubeConfigError

    source = tmp_path / "kc" / "config"
    source.parent.mkdir()
    source.write_text(yaml.safe_dump({
        "clusters": [{"name": "c", "cluster": {"server": "https://x",
                                               "certificate-authority": "ca.crt"}}],
        "users": [{"name": "u", "user": {"client-key": "u.key"}}],
        "contexts": [{"name": "a", "context": {"cluster": "c", "user": "u"}},
                     {"name": "b", "context": {"cluster": "c", "user": "u"}}],
        "current-context": "a"}))
    assert kubeconfig_for_context(source, None) == source
    copy = kubeconfig_for_context(source, "b")
    assert copy is not None and copy != source
    doc = yaml.safe_load(copy.read_text())
    assert doc["current-context"] == "b"
    assert doc["clusters"][0]["cluster"]["certificate-authority"] == str(source.parent / "ca.crt")
    assert doc["users"][0]["user"]["client-key"] == str(source.parent / "u.key")
    assert copy.stat().st_mode & 0o077 == 0
    with pytest.raises(KubeConfigError, match="context 'nope' is not defined"):
        kubeconfig_for_context(source, "nope")
