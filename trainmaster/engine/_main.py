"""`trainmaster pulumi ARGS...`: the four engine operations inline, the rest to the CLI."""

from __future__ import annotations

import subprocess
import sys
from collections.abc import Callable
from pathlib import Path

from trainmaster.engine._args import operation_name, parse_operation
from trainmaster.engine._env import EngineError, engine_env, find_project
from trainmaster.engine._run import run_operation

__all__ = ["main", "passthrough"]


def passthrough(args: list[str], project_dir: Path, env: dict[str, str]) -> int:
    """Run the built CLI as is (stack ls, config, version, plugin ls, ...); its exit code."""
    from trainmaster.toolchain import tool_path

    return subprocess.run([str(tool_path("pulumi")), *args], cwd=project_dir, env=env).returncode


def _ask() -> bool:
    answer = input("Do you want to perform this operation? [y/N] ")
    return answer.strip().lower() in ("y", "yes")


def _split_cwd(args: list[str]) -> tuple[Path | None, list[str]]:
    """Take pulumi's `--cwd DIR` / `-C DIR` out: it decides which project is used."""
    rest: list[str] = []
    cwd: Path | None = None
    it = iter(args)
    for arg in it:
        if arg in ("-C", "--cwd"):
            cwd = Path(next(it, "."))
        elif arg.startswith("--cwd="):
            cwd = Path(arg.split("=", 1)[1])
        else:
            rest.append(arg)
    return cwd, rest


def _nothing() -> None:
    return None


def main(args: list[str], ensure_tools: Callable[[], None] = _nothing) -> int:
    """The exit code; EngineError (exit 1, a message) when an operation fails.

    `ensure_tools` builds missing tools; it runs only once the command line is known to be
    usable, so a usage error never waits for a build of many minutes.
    """
    cwd, args = _split_cwd(args)
    project_dir = find_project(cwd)
    name = operation_name(args[0]) if args else None
    if name is None or "--help" in args or "-h" in args:
        ensure_tools()
        return passthrough(args, project_dir, engine_env())
    op = parse_operation(name, args[1:])
    confirm = _ask if sys.stdin.isatty() and sys.stdout.isatty() else None
    if not op.confirmed and confirm is None:
        raise EngineError(
            f"pulumi {op.name}: --yes or --skip-preview must be passed in to proceed "
            "when running in non-interactive mode"
        )
    ensure_tools()
    result = run_operation(op, project_dir, engine_env(), confirm=confirm)
    if not result.performed:
        print(f"confirmation declined, not proceeding with the {op.name}")
        return 1
    return 0
