"""`trainmaster pulumi ARGS...`: the Pulumi engine with this project's environment."""

from __future__ import annotations

import typer

from trainmaster.cli._app import app, say_target

HELP_FLAGS = ("--help", "-h")
CLUSTER_VERBS = ("preview", "up", "refresh", "destroy")
"""The verbs that talk to the cluster (through $KUBECONFIG, set by the kubeconfig rule)."""


@app.command(
    "pulumi",
    context_settings={"allow_extra_args": True, "ignore_unknown_options": True},
    # `trainmaster pulumi up --help` shows `pulumi up`'s own flags, so --help is ours to route.
    add_help_option=False,
)
def pulumi_cmd(ctx: typer.Context) -> None:
    """Run Pulumi on this project: local state, the built CLI and provider, the local cluster.

    `preview`, `up`, `refresh` and `destroy` run the program inline (see docs/pulumi.md);
    anything else (stack ls, config, version, ...) is passed to the built CLI as typed.
    `trainmaster pulumi up --help` shows Pulumi's own help once the Pulumi CLI is built.
    """
    from trainmaster.cli._tools import missing_tools, rough_minutes
    from trainmaster.toolchain import PULUMI_FAMILIES

    args = list(ctx.args)
    asks_help = any(a in HELP_FLAGS for a in args)
    missing = missing_tools(PULUMI_FAMILIES)
    if not args or args[0] in HELP_FLAGS or (asks_help and missing):
        # Help never builds anything: this command's help, and how to get Pulumi's.
        typer.echo(ctx.get_help())
        if missing:
            typer.echo(
                f"\nPulumi's own help needs the Pulumi CLI, not built yet: "
                f"`trainmaster tools build {' '.join(missing)}` (roughly "
                f"{rough_minutes(missing)} minutes, once).")
        raise typer.Exit(0)
    from trainmaster import engine  # the Pulumi SDK: heavy, only when used
    from trainmaster.cli._tools import build_with_progress

    def ensure_tools() -> None:
        # Called once the command line is known to be usable: then name the cluster.
        if args[0] in CLUSTER_VERBS and not asks_help:
            say_target(None, f"pulumi {args[0]}")
        if missing_tools(PULUMI_FAMILIES):  # a fresh clone: build once, then cached
            build_with_progress(list(PULUMI_FAMILIES), why=f"`trainmaster pulumi {args[0]}`")

    raise typer.Exit(engine.main(args, ensure_tools))
