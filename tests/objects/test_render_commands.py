"""Every container command that `trainmaster render` of an example stack produces, and
every gang the operator creates for its jobs, names a trainmaster CLI command that exists
(a renamed or missing command is a pod that crash-loops on a real cluster)."""

from __future__ import annotations

import re
import shlex
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
import typer
import yaml

from tests.helpers import ROOT, STACKS
from trainmaster.cli import app
from trainmaster.objects import build_gang, build_node_warmup
from trainmaster.spec import load_spec

STACK_FILES = sorted(STACKS.glob("*/cluster.yaml"))
_SCRIPT_CALL = re.compile(r"\btrainmaster((?:\s+[a-z][a-z-]*)+)")


def _pod_specs(obj: Any) -> Iterator[dict[str, Any]]:
    """Every pod spec inside an object (Deployment, DaemonSet, Job, CronJob, Pod...)."""
    if isinstance(obj, dict):
        if "containers" in obj and isinstance(obj["containers"], list):
            yield obj
        for value in obj.values():
            yield from _pod_specs(value)
    elif isinstance(obj, list):
        for value in obj:
            yield from _pod_specs(value)


def _commands(objs: list[dict[str, Any]]) -> Iterator[tuple[str, list[str]]]:
    for obj in objs:
        where = f"{obj.get('kind')}/{(obj.get('metadata') or {}).get('name')}"
        for pod in _pod_specs(obj):
            for c in [*pod.get("initContainers", []), *pod["containers"]]:
                words = [*c.get("command", []), *c.get("args", [])]
                if words and Path(words[0]).name == "trainmaster":
                    yield f"{where} {c['name']}", words[1:]
                elif words and Path(words[0]).name == "trainmaster-scheduler":
                    yield f"{where} {c['name']}", ["<scheduler>", *words[1:]]
        if obj.get("kind") == "ConfigMap":  # scripts: the launch script calls the CLI too
            for key, text in (obj.get("data") or {}).items():
                if key.endswith(".sh"):
                    code = "\n".join(line for line in text.splitlines()
                                     if not line.lstrip().startswith("#"))
                    for match in _SCRIPT_CALL.finditer(code):
                        yield f"{where} {key}", shlex.split(match.group(1))


def _resolve(words: list[str]) -> str | None:
    """The command path `words` names, or None if a word names no command. Groups are
    told by shape (`commands`): typer may bring its own copy of click's classes."""
    if words[:1] == ["<scheduler>"]:  # the scheduler's own argparse command line
        from trainmaster.scheduler.cli import _parser

        try:
            _parser().parse_args(words[1:])
        except SystemExit:
            return None
        return "trainmaster-scheduler"
    command: Any = typer.main.get_command(app)
    path = ["trainmaster"]
    for word in words:
        if not hasattr(command, "commands") or word.startswith("-"):
            break
        sub = command.commands.get(word)
        if sub is None:
            return None
        command, path = sub, [*path, word]
    return None if hasattr(command, "commands") else " ".join(path)


def _render(stack: Path, out: Path) -> list[dict[str, Any]]:
    proc = subprocess.run([sys.executable, "-m", "trainmaster", "render", str(stack),
                           "--output-dir", str(out)],
                          capture_output=True, text=True, cwd=ROOT, timeout=300)
    assert proc.returncode == 0, proc.stderr
    docs: list[dict[str, Any]] = []
    for path in sorted(out.rglob("*.yaml")):
        docs += [d for d in yaml.safe_load_all(path.read_text()) if d]
    return docs


@pytest.mark.parametrize("stack", STACK_FILES, ids=[p.parent.name for p in STACK_FILES])
def test_every_rendered_command_exists(stack: Path, tmp_path: Path) -> None:
    objs = _render(stack, tmp_path)
    spec = load_spec(stack)
    for job in spec.jobs:  # the gangs are the operator's, built from the same spec
        objs += build_gang(spec, job, attempt=1, resume_from="/ckpt/step-1")
    if spec.cache is not None:  # so are the warm-ups, one per (node, dataset)
        objs += [build_node_warmup(spec, d, "node-0", []) for d in spec.cache.datasets]
    found = list(_commands(objs))
    missing = [(where, words) for where, words in found if _resolve(words) is None]
    assert missing == []
    named = {_resolve(words) for _, words in found}
    assert "trainmaster-scheduler" in named and "trainmaster operator run" in named
    if spec.jobs:
        assert "trainmaster launch-bundle" in named and "trainmaster launch" in named
    if spec.cache is not None and spec.cache.warmup and spec.cache.datasets:
        assert "trainmaster cache warm" in named


def test_the_check_catches_a_missing_command() -> None:
    objs = [{"kind": "Job", "metadata": {"name": "x"}, "spec": {"template": {"spec": {
        "containers": [{"name": "c", "command": ["trainmaster", "nope", "run"]}]}}}}]
    found = list(_commands(objs))
    assert found == [("Job/x c", ["nope", "run"])]
    assert _resolve(found[0][1]) is None
    assert _resolve(["cache"]) is None  # a group alone runs nothing
    assert _resolve(["cache", "warm", "--dataset", "d"]) == "trainmaster cache warm"
