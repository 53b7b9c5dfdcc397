"""The commands the scheduler, operator and NIC agent containers run parse with the real
command-line parsers: every subcommand and flag exists (a renamed flag fails here, not in a
crash-looping pod)."""

from __future__ import annotations

from typing import Any

import pytest
import typer

from tests.helpers import stack_doc
from trainmaster.cli import app
from trainmaster.objects import build_all
from trainmaster.scheduler.cli import _parser
from trainmaster.spec import validate_data


def _containers() -> dict[str, list[str]]:
    objects = build_all(validate_data(stack_doc("dev"), "test"))
    out = {}
    for obj in (o for objs in objects.values() for o in objs):
        template = obj.get("spec", {}).get("template", {}).get("spec", {})
        for c in template.get("containers", []):
            if c.get("command") and c["command"][0].startswith("trainmaster"):
                out[f"{obj['kind']}/{obj['metadata']['name']}/{c['name']}"] = c["command"]
    return out


def _expand(args: list[str]) -> list[str]:
    # What the kubelet does with $(VAR) from the container's env.
    return [a.replace("$(POD_IP)", "10.0.0.7") for a in args]


def _parse_trainmaster(args: list[str]) -> Any:
    """Walk the command groups down to the leaf command and parse its options. Matched by
    shape (`resolve_command`), not class: typer may bring its own copy of click."""
    command: Any = typer.main.get_command(app)
    ctx = command.make_context("trainmaster", list(args))
    while hasattr(command, "resolve_command"):
        rest = [*getattr(ctx, "_protected_args", []), *ctx.args]
        name, command, rest = command.resolve_command(ctx, rest)
        assert command is not None, f"no command {name!r}"
        ctx = command.make_context(name, rest, parent=ctx)
    return command


COMMANDS = _containers()


def test_the_platform_runs_these_commands() -> None:
    kinds = {key.split("/")[0] for key in COMMANDS}
    assert {"Deployment", "DaemonSet"} <= kinds
    assert any("node-agent" in cmd for cmd in COMMANDS.values())
    assert any(cmd[0] == "trainmaster-scheduler" for cmd in COMMANDS.values())


@pytest.mark.parametrize("argv", [["operator", "run", "--bogus", "1"], ["node-agent", "nick"],
                                  ["node-agent", "nic", "--sysfs"]])
def test_a_wrong_command_does_not_parse(argv: list[str]) -> None:
    with pytest.raises(Exception, match=r"No such (option|command)|requires an argument"):
        _parse_trainmaster(argv)


@pytest.mark.parametrize("key", sorted(COMMANDS))
def test_each_command_parses(key: str) -> None:
    argv = _expand(COMMANDS[key])
    if argv[0] == "trainmaster-scheduler":
        args = _parser().parse_args(argv[1:])
        assert args.metrics_address == "10.0.0.7"
    else:
        assert argv[0] == "trainmaster"
        _parse_trainmaster(argv[1:])
