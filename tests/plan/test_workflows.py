"""The GitHub workflows call only trainmaster commands and options that exist, and run the
pull-request flow of docs/policies.md: validate, policy check, plan comment, Pulumi preview
with the policy pack on pull requests; `pulumi up` with it on main."""

from __future__ import annotations

import re
import shlex
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
import typer
import yaml

from tests.helpers import ROOT
from trainmaster.cli import app, main

GITHUB = ROOT / ".github"
WORKFLOWS = GITHUB / "workflows"
_SEPARATORS = re.compile(r"&&|\|\||[|;]")
_REDIRECT = re.compile(r"^\d*[<>]")


def _yaml_files() -> list[Path]:
    return sorted(p for p in GITHUB.rglob("*") if p.suffix in (".yaml", ".yml"))


def _load(path: Path) -> dict[Any, Any]:
    doc: dict[Any, Any] = yaml.safe_load(path.read_text())
    return doc


def _scripts(node: Any) -> Iterator[str]:
    """Every `run:` script in a workflow or composite action."""
    if isinstance(node, dict):
        for key, value in node.items():
            if key == "run" and isinstance(value, str):
                yield value
            else:
                yield from _scripts(value)
    elif isinstance(node, list):
        for item in node:
            yield from _scripts(item)


def _commands(script: str, program: str) -> Iterator[list[str]]:
    """The arguments of each call of `program` in a shell script (a rough shell reading:
    enough for CI scripts, which keep to simple commands, pipes and redirects)."""
    for line in script.replace("\\\n", " ").splitlines():
        for segment in _SEPARATORS.split(line):
            try:
                words = shlex.split(segment, comments=True)
            except ValueError:
                continue
            for i, word in enumerate(words):
                if word == program or word.endswith(f"/{program}"):
                    args = []
                    for arg in words[i + 1 :]:
                        if _REDIRECT.match(arg):
                            break
                        args.append(arg)
                    yield args
                    break


def _calls(program: str) -> list[tuple[str, list[str]]]:
    return [
        (path.relative_to(ROOT).as_posix(), args)
        for path in _yaml_files()
        for script in _scripts(_load(path))
        for args in _commands(script, program)
    ]


def _resolve(args: list[str]) -> tuple[list[str], Any]:
    """The subcommand path the arguments name, and its command; fails on unknown ones.

    Typer builds click-style commands (groups have `.commands`, commands `.params`); it may
    vendor click, so this reads those attributes rather than checking click's classes.
    """
    command: Any = typer.main.get_command(app)
    path: list[str] = []
    rest = list(args)
    while hasattr(command, "commands"):
        assert rest and not rest[0].startswith("-"), f"no subcommand after {path}: {args}"
        name = rest.pop(0)
        sub = command.commands.get(name)
        assert sub is not None, f"`trainmaster {' '.join([*path, name])}` does not exist"
        command, path = sub, [*path, name]
    if (getattr(command, "context_settings", None) or {}).get("ignore_unknown_options"):
        return path, command  # a pass-through (`trainmaster pulumi`): the options are Pulumi's
    # Every command takes -h/--help (the root's help_option_names, handed down by click).
    options = {opt for param in command.params for opt in param.opts} | {"-h", "--help"}
    for arg in rest:
        if arg.startswith("--"):
            assert arg.split("=")[0] in options, f"`trainmaster {' '.join(path)}` has no {arg}"
    return path, command


CALLS = _calls("trainmaster")


def test_workflows_call_trainmaster() -> None:
    called = {" ".join(_resolve(args)[0]) for _, args in CALLS}
    assert {"validate", "policy check", "plan", "tools build", "tools path"} <= called


@pytest.mark.parametrize(("where", "args"), CALLS, ids=[f"{w}:{' '.join(a)}" for w, a in CALLS])
def test_every_trainmaster_call_exists(where: str, args: list[str]) -> None:
    path, _ = _resolve(args)
    assert main([*path, "--help"]) == 0, where


def _on(doc: dict[Any, Any]) -> Any:
    return doc.get("on", doc.get(True))  # YAML 1.1 reads a bare `on` key as true


def _job_scripts(doc: dict[Any, Any], job: str) -> str:
    return "\n".join(_scripts(doc["jobs"][job]))


def test_pull_request_flow() -> None:
    doc = _load(WORKFLOWS / "pull-request.yaml")
    assert "pull_request" in _on(doc)
    checks = _job_scripts(doc, "checks")
    assert "trainmaster validate" in checks and "trainmaster policy check" in checks
    plan = _job_scripts(doc, "plan")
    assert "trainmaster plan --base" in plan and "gh pr comment" in plan
    assert doc["jobs"]["plan"]["steps"][0]["with"]["fetch-depth"] == 0  # the base commit
    assert doc["permissions"]["pull-requests"] == "write"
    preview = _job_scripts(doc, "preview")
    assert re.search(r"pulumi preview .*--policy-pack policies", preview)
    assert doc["jobs"]["preview"]["needs"] == "checks"


def test_merge_to_main_deploys_with_the_policy_pack() -> None:
    doc = _load(WORKFLOWS / "deploy.yaml")
    assert _on(doc)["push"]["branches"] == ["main"]
    script = _job_scripts(doc, "up")
    assert re.search(r"pulumi up .*--yes.*--policy-pack policies", script)
    assert script.index("trainmaster policy check") < script.index("pulumi up")
    assert doc["jobs"]["up"]["concurrency"]["cancel-in-progress"] is False


def test_policy_pack_path_is_the_pack() -> None:
    assert (ROOT / "policies" / "PulumiPolicy.yaml").is_file()
    assert (ROOT / "Pulumi.yaml").is_file()  # `pulumi preview` runs from the root


def test_a_tag_publishes_the_image_built_without_docker() -> None:
    doc = _load(WORKFLOWS / "image.yaml")
    assert _on(doc)["push"]["tags"] == ["v*"]
    publish = doc["jobs"]["publish"]
    assert publish["permissions"]["packages"] == "write"
    script = _job_scripts(doc, "publish")
    assert "trainmaster image build --tag" in script
    assert re.search(r'skopeo copy .*"oci-archive:.*" "docker://\$IMAGE"', script.replace(
        "\\\n", " "))
    assert "ghcr.io/$owner/trainmaster:$version" in script
    assert "docker build -f Containerfile" in _job_scripts(doc, "containerfile")
