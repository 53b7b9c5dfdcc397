"""The flags of `pulumi preview|up|refresh|destroy` that the inline engine path understands.

They are parsed here (not handed to the CLI) because the Automation API builds the CLI's
command line itself. A flag outside this set is refused with a message rather than dropped:
silently ignoring `--target` would apply the whole stack.
"""

from __future__ import annotations

import argparse
from dataclasses import dataclass
from typing import Literal, get_args

from trainmaster.errors import UsageError

__all__ = ["OPERATIONS", "Operation", "OperationName", "operation_name", "parse_operation"]

OperationName = Literal["preview", "up", "refresh", "destroy"]
OPERATIONS: tuple[OperationName, ...] = get_args(OperationName)


def operation_name(word: str) -> OperationName | None:
    """`word` as an operation the inline path runs, or None (a command for the CLI)."""
    return next((name for name in OPERATIONS if name == word), None)


@dataclass(frozen=True)
class Operation:
    """One engine operation as the user typed it."""

    name: OperationName
    stack: str | None = None
    yes: bool = False
    skip_preview: bool = False
    refresh: bool = False
    diff: bool = False
    expect_no_changes: bool = False
    remove: bool = False
    targets: tuple[str, ...] = ()
    policy_packs: tuple[str, ...] = ()
    parallel: int | None = None
    message: str | None = None
    color: str | None = None
    suppress_outputs: bool = False

    @property
    def confirmed(self) -> bool:
        """Whether to go ahead without asking (Pulumi: --yes or --skip-preview)."""
        return self.name == "preview" or self.yes or self.skip_preview


class _Parser(argparse.ArgumentParser):
    def error(self, message: str) -> None:  # type: ignore[override]
        raise UsageError(f"pulumi {self.prog}: {message}")  # a bad value: exit 2


def _parser(name: OperationName) -> _Parser:
    p = _Parser(prog=name, add_help=False, allow_abbrev=False)
    p.add_argument("-s", "--stack")
    p.add_argument("-y", "--yes", action="store_true")
    p.add_argument("-f", "--skip-preview", action="store_true")
    p.add_argument("--diff", action="store_true")
    p.add_argument("-t", "--target", action="append", default=[])
    p.add_argument("-p", "--parallel", type=int)
    p.add_argument("-m", "--message")
    p.add_argument("--color", choices=("always", "never", "raw", "auto"))
    p.add_argument("--suppress-outputs", action="store_true")
    # The Automation API always runs the CLI non-interactively; accepted for scripts.
    p.add_argument("--non-interactive", action="store_true")
    if name != "refresh":
        p.add_argument("-r", "--refresh", action="store_true")
    if name != "destroy":
        p.add_argument("--expect-no-changes", action="store_true")
    if name in ("preview", "up"):
        p.add_argument("--policy-pack", action="append", default=[])
    if name == "destroy":
        p.add_argument("--remove", action="store_true")
    return p


def parse_operation(name: OperationName, args: list[str]) -> Operation:
    """Parse the flags after `pulumi NAME`; a UsageError (exit 2) names any flag not
    supported."""
    parser = _parser(name)
    ns, unknown = parser.parse_known_args(args)
    if unknown:
        supported = " ".join(a.option_strings[-1] for a in parser._actions)
        raise UsageError(
            f"pulumi {name}: not supported by `trainmaster pulumi` (inline program): "
            f"{' '.join(unknown)}; supported: {supported}"
        )
    return Operation(
        name=name,
        stack=ns.stack,
        yes=ns.yes,
        skip_preview=ns.skip_preview,
        refresh=getattr(ns, "refresh", False),
        diff=ns.diff,
        expect_no_changes=getattr(ns, "expect_no_changes", False),
        remove=getattr(ns, "remove", False),
        targets=tuple(ns.target),
        policy_packs=tuple(getattr(ns, "policy_pack", [])),
        parallel=ns.parallel,
        message=ns.message,
        color=ns.color,
        suppress_outputs=ns.suppress_outputs,
    )
