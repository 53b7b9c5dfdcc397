"""preview / up / refresh / destroy of a stack, through the Automation API, program inline.

Why inline: the CLI starts a Python program from Pulumi.yaml through the Python language host
(pulumi-language-python), whose current version cannot be built here; the old v3.79.0 one
that can (toolchain family pulumi-language-python, for plain `pulumi`) also needs the
project's virtualenv active. With an inline program the Python SDK serves the language
runtime itself, in this process, and hands its address to the built CLI
(`pulumi up --client=ADDR`); the engine and the Kubernetes provider are the real ones.
The program is components.program.program, the very function __main__.py calls.
"""

from __future__ import annotations

import functools
import os
import re
import sys
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from pulumi import automation as auto
from semver import VersionInfo

from trainmaster.engine._args import Operation
from trainmaster.engine._env import EngineError
from trainmaster.engine._policy import policy_pack_paths
from trainmaster.toolchain import RECIPES, tool_path

__all__ = ["OperationResult", "run_operation", "workspace"]

Output = Callable[[str], Any]


@dataclass(frozen=True)
class OperationResult:
    """What an operation did: the engine's counts per change kind ("create", "same", ...)."""

    name: str
    stack: str
    changes: dict[str, int] = field(default_factory=dict)
    outputs: dict[str, Any] = field(default_factory=dict)
    performed: bool = True  # False: the user declined after the preview


class _BuiltPulumi(auto.PulumiCommand):
    """The CLI built from Go modules. PulumiCommand(root=...) wants ROOT/bin/pulumi and runs
    `pulumi version` to learn the version; the binary's path and pinned version are known."""

    def __init__(self) -> None:  # deliberately not calling super().__init__: see above
        self.command = str(tool_path("pulumi"))
        self.version = VersionInfo.parse(RECIPES["pulumi"].version.lstrip("v"))


def workspace(
    project_dir: Path, env: Mapping[str, str], failures: list[str] | None = None
) -> auto.LocalWorkspace:
    """A workspace on the project folder: Pulumi.yaml and stacks/ are read from there, never
    rewritten (no project settings are passed). When the program stops itself (RunError:
    an invalid spec), its message goes to `failures`."""
    import pulumi

    from components.program import program  # the Pulumi SDK and all components: heavy

    # The first file of the engine's $KUBECONFIG: the provider reads it from its own
    # environment, the in-process program's CRD checks from this argument.
    ambient = (env.get("KUBECONFIG") or "").split(os.pathsep)[0] or None
    bound = functools.partial(program, project_dir, ambient)

    def inline() -> None:
        try:
            bound()
        except pulumi.RunError as exc:
            # The engine prints it among its diagnostics; kept to be the command's message too.
            if failures is not None:
                failures.append(str(exc))
            raise

    return auto.LocalWorkspace(
        work_dir=str(project_dir),
        pulumi_home=env["PULUMI_HOME"],
        program=inline,
        env_vars=dict(env),
        pulumi_command=_BuiltPulumi(),
    )


def _stack(ws: auto.LocalWorkspace, op: Operation) -> auto.Stack:
    name = op.stack
    if name is None:
        current = ws.stack()
        if current is None:
            raise EngineError(
                "no stack selected: pass --stack NAME "
                "(or run `trainmaster pulumi stack select NAME`)"
            )
        name = current.name
    try:
        if op.name in ("preview", "up"):
            # As `pulumi up` offers interactively: a stack with a config file in stacks/ but
            # no state yet (a fresh clone) is created.
            return auto.Stack.create_or_select(name, ws)
        return auto.Stack.select(name, ws)
    except auto.StackNotFoundError:
        raise EngineError(
            f"no stack named {name!r} in {ws.env_vars['PULUMI_BACKEND_URL']}"
        ) from None


def _common(op: Operation, on_output: Output, on_error: Output) -> dict[str, Any]:
    color = op.color or ("always" if sys.stdout.isatty() else "never")
    opts: dict[str, Any] = {
        "on_output": on_output,
        "on_error": on_error,
        "color": color,
        "diff": op.diff or None,
        "parallel": op.parallel,
        "message": op.message,
        "target": list(op.targets) or None,
        "suppress_outputs": op.suppress_outputs or None,
    }
    return {k: v for k, v in opts.items() if v is not None}


def _counts(changes: Mapping[Any, int]) -> dict[str, int]:
    # Keys are OpType (a str Enum) in previews and plain strings in update summaries.
    return {str(getattr(kind, "value", kind)): count for kind, count in changes.items()}


def _packs(stack: auto.Stack, op: Operation) -> list[str] | None:
    home = Path(stack.workspace.env_vars["PULUMI_HOME"])
    return policy_pack_paths(op.policy_packs, home) or None


def _preview(stack: auto.Stack, op: Operation, opts: dict[str, Any]) -> dict[str, int]:
    """The preview of `op` (a dry run of what it would do); returns the change counts."""
    if op.name == "destroy":
        return _counts(stack.preview_destroy(refresh=op.refresh or None, **opts).change_summary)
    if op.name == "refresh":
        return _counts(stack.preview_refresh(**opts).change_summary)
    result = stack.preview(
        refresh=op.refresh or None,
        expect_no_changes=op.expect_no_changes or None,
        policy_packs=_packs(stack, op),
        **opts,
    )
    return _counts(result.change_summary)


def _apply(stack: auto.Stack, op: Operation, opts: dict[str, Any]) -> OperationResult:
    summary: auto.UpdateSummary
    outputs: dict[str, Any] = {}
    if op.name == "up":
        up = stack.up(
            refresh=op.refresh or None,
            expect_no_changes=op.expect_no_changes or None,
            policy_packs=_packs(stack, op),
            **opts,
        )
        summary, outputs = up.summary, {k: v.value for k, v in up.outputs.items()}
    elif op.name == "refresh":
        summary = stack.refresh(expect_no_changes=op.expect_no_changes or None, **opts).summary
    else:
        summary = stack.destroy(
            refresh=op.refresh or None, remove=op.remove or None, **opts
        ).summary
    changes = _counts(summary.resource_changes or {})
    return OperationResult(op.name, stack.name, changes, outputs)


def run_operation(
    op: Operation,
    project_dir: Path,
    env: Mapping[str, str],
    on_output: Output | None = None,
    on_error: Output | None = None,
    confirm: Callable[[], bool] | None = None,
    on_event: auto.OnEvent | None = None,
) -> OperationResult:
    """Run one operation, streaming the engine's output; EngineError when it fails.

    Without --yes/--skip-preview, `confirm` is asked after a preview (as `pulumi up` asks);
    without a `confirm` (not a terminal) that is an error, as in the CLI's non-interactive mode.
    """
    if not op.confirmed and confirm is None:
        raise EngineError(
            f"pulumi {op.name}: --yes or --skip-preview must be passed in to proceed "
            "when running in non-interactive mode"
        )
    on_output = on_output or _to_stdout
    on_error = on_error or _to_stderr
    failures: list[str] = []
    ws = workspace(project_dir, env, failures)
    stack = _stack(ws, op)
    opts = _common(op, on_output, on_error)
    if on_event is not None:
        opts["on_event"] = on_event
    try:
        if op.name == "preview":
            return OperationResult("preview", stack.name, _preview(stack, op, opts))
        if not op.confirmed:
            _preview(stack, op, opts)
            if confirm is None or not confirm():
                return OperationResult(op.name, stack.name, performed=False)
        return _apply(stack, op, opts)
    except auto.CommandError as exc:
        if failures:  # the program stopped itself (an invalid spec): that is the message
            raise EngineError(f"pulumi {op.name} (stack {stack.name}): {failures[0]}") from None
        raise EngineError(
            f"pulumi {op.name} of stack {stack.name!r} failed; the engine's output is above"
            f"\n{_error_lines(str(exc))}"
        ) from None


def _to_stdout(line: str) -> None:
    print(line, flush=True)


def _to_stderr(line: str) -> None:
    print(line, file=sys.stderr, flush=True)


def _error_lines(text: str) -> str:
    """The engine's `error: ...` lines (what went wrong), without the rest of its output."""
    found = (re.search(r"error: .*", line) for line in text.splitlines())
    lines = [m.group(0).strip() for m in found if m is not None]
    return "\n".join(dict.fromkeys(lines)) or text.strip()[-2000:]
