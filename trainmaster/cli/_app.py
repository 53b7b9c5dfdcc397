"""The root Typer app and its sub-command groups, shared by the command modules."""

from __future__ import annotations

import typer

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
