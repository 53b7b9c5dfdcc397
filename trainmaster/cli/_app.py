"""The root Typer app, its sub-command groups, and how a run of it ends (exit code, stderr)."""

from __future__ import annotations

import sys
from typing import Any, Protocol, runtime_checkable

import typer

from trainmaster.errors import TrainmasterError

PROG = "trainmaster"

app = typer.Typer(
    help="Declarative large-model training on Kubernetes GPU clusters.",
    no_args_is_help=True,
    pretty_exceptions_enable=False,
    add_completion=False,
)
tools_app = typer.Typer(
    help="Build the pinned Go binaries (control plane, kwok, Pulumi).", no_args_is_help=True
)
cluster_app = typer.Typer(
    help="A real local Kubernetes control plane with simulated GPU nodes.", no_args_is_help=True
)
app.add_typer(tools_app, name="tools")
app.add_typer(cluster_app, name="cluster")


@runtime_checkable
class ClickError(Protocol):
    """What every click exception carries. Matched by shape, never by class: typer 0.2x
    raises its own vendored copy of click's exceptions, which `click.ClickException` misses."""

    exit_code: int

    def format_message(self) -> str: ...


def usage_line(message: str, command: str, usage: str) -> str:
    """One line for a usage error: what was wrong, the usage, where the help is."""
    usage = " ".join(usage.split()).removeprefix("Usage: ").removeprefix("usage: ")
    return f"error: {message.rstrip('.')} (usage: {usage}; see '{command} --help')"


def report_click_error(err: ClickError) -> int:
    """Print a click error as one line on stderr and return its exit code."""
    ctx: Any = getattr(err, "ctx", None)
    message = err.format_message()
    if type(err).__name__ == "NoArgsIsHelpError":
        # A group run without a command: the message is its help (typer's rich mode has
        # already printed it and left the message empty).
        if message.strip():
            print(message, file=sys.stderr)
        return err.exit_code
    if ctx is None:
        print(f"error: {message}", file=sys.stderr)
    else:
        print(usage_line(message, ctx.command_path, ctx.get_usage()), file=sys.stderr)
    return err.exit_code


def invoke(argv: list[str] | None = None) -> int:
    """Run `app` on argv; every way it ends becomes an exit code, never a traceback."""
    try:
        # Without standalone mode click returns typer.Exit's code instead of exiting, and
        # raises usage errors to us instead of printing them its own (multi-line) way.
        rc = app(args=argv, prog_name=PROG, standalone_mode=False)
    except TrainmasterError as exc:
        print(f"error: {exc}", file=sys.stderr)
        return exc.exit_code
    except typer.Abort:
        print("aborted", file=sys.stderr)
        return 130
    except KeyboardInterrupt:
        print("interrupted", file=sys.stderr)
        return 130
    except Exception as exc:
        if not isinstance(exc, ClickError):
            raise
        return report_click_error(exc)
    return rc if isinstance(rc, int) else 0
