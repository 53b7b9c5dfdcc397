"""The root Typer app, its sub-command groups, and how a run of it ends (exit code, stderr).

``invoke`` is the one boundary where the CLI turns errors into exits:

- usage errors (click's, and ``trainmaster.errors.UsageError``), including a bad option
  value: one line, exit 2;
- a file the user named that cannot be read or written (``OSError``), or a kubeconfig
  that cannot be used: one line, exit 2;
- an API server that does not answer: one line naming the server, exit 1;
- any other ``TrainmasterError`` (invalid content, a failed build, ...): its message and
  its ``exit_code`` (1 unless set).

Anything else is a bug in trainmaster and keeps its traceback.
"""

from __future__ import annotations

import sys
from pathlib import Path
from typing import Annotated, Any, Protocol, runtime_checkable

import typer

from trainmaster.cli import _help
from trainmaster.errors import TrainmasterError, UsageError

_help.install()

PROG = "trainmaster"

# -h as well as --help, on every command (click hands the names down to sub-contexts).
CONTEXT = {"help_option_names": ["-h", "--help"]}

app = typer.Typer(
    help="Declarative large-model training on Kubernetes GPU clusters.",
    no_args_is_help=True,
    pretty_exceptions_enable=False,
    add_completion=True,
    context_settings=CONTEXT,
)
tools_app = typer.Typer(
    help="Build the pinned Go binaries (control plane, kwok, Pulumi).", no_args_is_help=True
)
cluster_app = typer.Typer(
    help="The local control plane itself (`trainmaster cluster status`: its processes and "
    "nodes); `trainmaster status` shows the workload on any cluster.",
    no_args_is_help=True,
)
app.add_typer(tools_app, name="tools")
app.add_typer(cluster_app, name="cluster")


def _version(value: bool) -> None:
    if value:
        from importlib.metadata import version

        print(f"{PROG} {version('trainmaster')}")
        raise typer.Exit(0)


@app.callback()
def root(
    show_version: Annotated[
        bool,
        typer.Option("--version", callback=_version, is_eager=True,
                     help="Print the version and exit."),
    ] = False,
) -> None:
    """Declarative large-model training on Kubernetes GPU clusters."""


# --- options every command that talks to a cluster takes --------------------------------


def _select_context(value: str | None) -> str | None:
    if value:
        from trainmaster.kubeclient import select_context

        select_context(value)
    return value


_target: dict[str, Path | None] = {"kubeconfig": None}


def _remember_kubeconfig(value: Path | None) -> Path | None:
    # Recorded so that an unreachable server can be named at the boundary.
    _target["kubeconfig"] = value
    return value


def _select_cluster(value: str | None) -> str | None:
    if value:
        from trainmaster.kubeclient import select_cluster

        select_cluster(value)
    return value


KubeconfigOpt = Annotated[
    Path | None,
    typer.Option("--kubeconfig", metavar="FILE", callback=_remember_kubeconfig,
                 help="Kubeconfig (default, as kubectl: $KUBECONFIG, else in-cluster in a "
                 "pod, else ~/.kube/config; docs/real-cluster.md)."),
]
ContextOpt = Annotated[
    str | None,
    typer.Option("--context", metavar="NAME", callback=_select_context,
                 help="Kubeconfig context to use (default: its current-context)."),
]
ClusterOpt = Annotated[
    str | None,
    typer.Option("--cluster", metavar="NAME", callback=_select_cluster,
                 help="A local cluster of `trainmaster cluster up` by name: its kubeconfig "
                 "(instead of --kubeconfig)."),
]


def say_target(kubeconfig: Path | None, command: str, chosen_by: str | None = None) -> None:
    """Name, on stderr, the cluster a command is about to talk to: its context, server
    and the kubeconfig the rule chose (and why). Every command that talks to a cluster
    calls this first, so that kubectl and trainmaster never silently differ."""
    from trainmaster.kubeclient import describe_target, selected_cluster

    if kubeconfig is not None and selected_cluster() is not None:
        raise UsageError("give --kubeconfig FILE or --cluster NAME, not both")
    target = describe_target(kubeconfig, chosen_by)
    print(f"{PROG} {command}: {target.describe()}", file=sys.stderr, flush=True)


# --- the boundary -----------------------------------------------------------------------


@runtime_checkable
class ClickError(Protocol):
    """What every click exception carries. Matched by shape, never by class: typer 0.2x
    raises its own vendored copy of click's exceptions, which `click.ClickException` misses."""

    exit_code: int

    def format_message(self) -> str: ...


def usage_line(message: str, command: str, usage: str | None = None) -> str:
    """One line for a usage error: what was wrong, the usage, where the help is."""
    hint = f"see '{command} --help'"
    if usage:
        usage = " ".join(usage.split()).removeprefix("Usage: ").removeprefix("usage: ")
        hint = f"usage: {usage}; {hint}"
    return f"error: {message.rstrip('.')} ({hint})"


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


def command_path(argv: list[str]) -> str:
    """`trainmaster simulate` for argv ['simulate', '--nodes', '0', ...]: the deepest
    command the words name, for the help hint of a usage error raised by our own code."""
    command: Any = typer.main.get_command(app)
    words = [PROG]
    for word in argv:
        if word.startswith("-"):
            continue
        sub = getattr(command, "commands", {}).get(word)
        if sub is None:
            break
        command, words = sub, [*words, word]
    return " ".join(words)


def _server() -> str:
    """The API server the kubeconfig rule picks, for a message; '' when unknown."""
    import asyncio

    from trainmaster.kubeclient import load_configuration

    try:
        cfg = asyncio.run(load_configuration(_target["kubeconfig"]))
    except Exception:  # naming the server is a courtesy: never fail the message over it
        return ""
    return str(getattr(cfg, "host", "") or "")


def report_api_error(exc: Exception) -> int:
    """An ``ApiError``: no answer (status 0) names the server; else its HTTP status."""
    status = int(getattr(exc, "status", 0))
    server = _server()
    where = f"the Kubernetes API server {server}" if server else "the Kubernetes API server"
    if status == 0:
        reason = str(getattr(exc, "reason", exc)).split(": ", 1)[-1]
        print(f"error: cannot reach {where}: {reason} (is the cluster up? "
              f"`trainmaster cluster status`)", file=sys.stderr)
    else:
        print(f"error: {where} answered {exc}", file=sys.stderr)
    return 1


def report_os_error(exc: OSError) -> int:
    """A file or folder the user named that cannot be read or written: exit 2."""
    names = " -> ".join(str(n) for n in (exc.filename, exc.filename2) if n is not None)
    reason = exc.strerror or str(exc)
    print(f"error: {names}: {reason}" if names else f"error: {reason}", file=sys.stderr)
    return 2


def invoke(argv: list[str] | None = None) -> int:
    """Run `app` on argv; every way it ends becomes an exit code, never a traceback."""
    args = list(sys.argv[1:] if argv is None else argv)
    try:
        # Without standalone mode click returns typer.Exit's code instead of exiting, and
        # raises usage errors to us instead of printing them its own (multi-line) way.
        rc = app(args=args, prog_name=PROG, standalone_mode=False)
    except UsageError as exc:
        print(usage_line(str(exc), command_path(args)), file=sys.stderr)
        return exc.exit_code
    except TrainmasterError as exc:
        print(f"error: {exc}", file=sys.stderr)
        return exc.exit_code
    except typer.Abort:
        print("aborted", file=sys.stderr)
        return 130
    except KeyboardInterrupt:
        print("interrupted", file=sys.stderr)
        return 130
    except OSError as exc:
        return report_os_error(exc)
    except Exception as exc:
        if isinstance(exc, ClickError):
            return report_click_error(exc)
        # Not imported up front (the client costs start-up time): if its module is not
        # loaded, no ApiError can have been raised.
        client_errors = sys.modules.get("trainmaster.kubeclient._errors")
        if client_errors is not None and isinstance(exc, client_errors.ApiError):
            return report_api_error(exc)
        raise
    return rc if isinstance(rc, int) else 0


def kubeconfig_for_context(kubeconfig: Path | None, context: str | None) -> Path | None:
    """For commands that hand a kubeconfig file to other processes (benchmarks start
    schedulers): a private copy whose current-context is `context`, relative file paths
    made absolute, removed at exit. Without a context: the kubeconfig as given."""
    if context is None:
        return kubeconfig
    import atexit
    import os
    import tempfile

    import yaml

    from trainmaster.kubeclient import KubeConfigError, choose_kubeconfig

    source = choose_kubeconfig(kubeconfig)
    if source is None:
        raise UsageError("--context needs a kubeconfig file (in a pod there is none)")
    doc = yaml.safe_load(source.read_text())
    if not isinstance(doc, dict) or context not in {
            c.get("name") for c in doc.get("contexts") or [] if isinstance(c, dict)}:
        raise KubeConfigError(f"{source}: context {context!r} is not defined in contexts")
    doc["current-context"] = context
    for section, keys in (("clusters", ("certificate-authority",)),
                          ("users", ("client-certificate", "client-key", "tokenFile"))):
        for entry in doc.get(section) or []:
            body = entry.get(section[:-1]) or {}
            for key in keys:
                if isinstance(body.get(key), str):
                    body[key] = str((source.parent / body[key]).resolve())
    fd, name = tempfile.mkstemp(prefix="trainmaster-kubeconfig-", suffix=".yaml")
    with os.fdopen(fd, "w") as out:  # mkstemp: mode 0600, as kubeconfigs should be
        yaml.safe_dump(doc, out)
    atexit.register(lambda: Path(name).unlink(missing_ok=True))
    return Path(name)
