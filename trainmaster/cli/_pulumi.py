"""`trainmaster pulumi ARGS...`: the Pulumi engine with this project's environment."""

from __future__ import annotations

import typer

from trainmaster.cli._app import app


@app.command(
    "pulumi",
    context_settings={"allow_extra_args": True, "ignore_unknown_options": True},
    # --help goes to Pulumi (`trainmaster pulumi up --help` shows `pulumi up`'s flags).
    add_help_option=False,
)
def pulumi_cmd(ctx: typer.Context) -> None:
    """Run Pulumi on this project: local state, the built CLI and provider, the local cluster.

    `preview`, `up`, `refresh` and `destroy` run the program inline (see docs/pulumi.md);
    anything else (stack ls, config, version, ...) is passed to the built CLI as typed.
    """
    from trainmaster import engine  # the Pulumi SDK: heavy, only when used
    from trainmaster.cli._tools import build_with_progress
    from trainmaster.toolchain import is_built
    from trainmaster.toolchain._recipes import PULUMI_FAMILIES

    def ensure_tools() -> None:
        missing = [family for family in PULUMI_FAMILIES if not is_built(family)]
        if missing:  # a fresh clone: build once (minutes), then cached
            build_with_progress(missing)

    raise typer.Exit(engine.main(list(ctx.args), ensure_tools))
