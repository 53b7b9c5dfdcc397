"""`trainmaster operator run|unfence`, `trainmaster launch -- CMD`, `launch-bundle`."""

from __future__ import annotations

from pathlib import Path
from typing import Annotated

import typer

from trainmaster.cli._app import ClusterOpt, ContextOpt, KubeconfigOpt, app, say_target
from trainmaster.errors import UsageError

operator_app = typer.Typer(
    help="The operator that runs TrainingJobs as gangs and restores them after faults.",
    no_args_is_help=True,
)
app.add_typer(operator_app, name="operator")




@operator_app.command("run")
def operator_run(
    namespace: Annotated[
        list[str] | None,
        typer.Option("--namespace", "-n", help="Namespace to serve (repeatable; globs allowed)."),
    ] = None,
    clusterwide: Annotated[
        bool, typer.Option("--all-namespaces", "-A", help="Serve every namespace.")
    ] = False,
    spec_configmap: Annotated[
        str | None,
        typer.Option("--spec-configmap", help="ConfigMap holding the cluster spec (key "
                     "cluster.yaml), as the Pulumi component writes it."),
    ] = None,
    spec_namespace: Annotated[
        str | None,
        typer.Option("--spec-namespace", help="Namespace of --spec-configmap (default: the "
                     "first --namespace)."),
    ] = None,
    spec: Annotated[
        Path | None, typer.Option("--spec", help="Cluster spec file, instead of a ConfigMap.")
    ] = None,
    kubeconfig: KubeconfigOpt = None,
    context: ContextOpt = None,
    cluster_name: ClusterOpt = None,
    unhealthy_condition: Annotated[
        list[str] | None,
        typer.Option("--unhealthy-condition", help="Node condition TYPE=STATUS that means "
                     "sick, besides Ready!=True (repeatable; default GPUHealthy=False and "
                     "NICHealthy=False)."),
    ] = None,
    liveness: Annotated[
        str | None, typer.Option("--liveness", help="Liveness endpoint, e.g. "
                                 "http://0.0.0.0:8080/healthz.")
    ] = None,
    metrics_address: Annotated[
        str, typer.Option("--metrics-address", help="Listen address of /metrics: loopback "
                          "on a host; the pod's IP in a cluster.")
    ] = "127.0.0.1",
    metrics_port: Annotated[
        int, typer.Option("--metrics-port", help="Port of /metrics (0: off).")
    ] = 0,
    verbose: Annotated[bool, typer.Option("--verbose", "-v")] = False,
) -> None:
    """Run the operator in the foreground until SIGINT/SIGTERM."""
    from trainmaster.operator import HealthRules, OperatorConfig, SpecRef, run_operator

    namespaces = tuple(namespace or ())
    if clusterwide == bool(namespaces):
        raise UsageError("give --namespace (one or more) or --all-namespaces")
    if (spec is None) == (spec_configmap is None):
        raise UsageError("give --spec-configmap NAME or --spec FILE")
    cm_namespace = spec_namespace or (namespaces[0] if namespaces else None)
    if spec_configmap is not None and (not cm_namespace or "*" in cm_namespace):
        raise UsageError("--spec-namespace is needed with --all-namespaces or a glob")
    try:
        rules = HealthRules.parse(unhealthy_condition) if unhealthy_condition else HealthRules()
    except ValueError as exc:
        raise UsageError(f"--unhealthy-condition {exc}") from None
    ref = SpecRef(namespace=cm_namespace, configmap=spec_configmap, file=spec)
    # Later outages are retried for as long as the operator runs; a server that does not
    # answer at start is a wrong kubeconfig far more often, so say so now (exit 1).
    from trainmaster.kubeclient import SyncKube

    say_target(kubeconfig, "operator run")
    with SyncKube.connect(kubeconfig) as kube:
        kube.get("/version")
    run_operator(
        OperatorConfig(spec=ref, namespaces=namespaces, clusterwide=clusterwide,
                       kubeconfig=kubeconfig, health=rules, liveness=liveness,
                       metrics_address=metrics_address, metrics_port=metrics_port),
        verbose=verbose,
    )


@operator_app.command("unfence")
def operator_unfence(
    nodes: Annotated[list[str], typer.Argument(help="Nodes to return to service.")],
    kubeconfig: KubeconfigOpt = None,
    context: ContextOpt = None,
    cluster_name: ClusterOpt = None,
) -> None:
    """Lift trainmaster's fence (taint, and the cordon if it set one) from repaired nodes."""
    from trainmaster.operator import unfence_nodes

    say_target(kubeconfig, "operator unfence")
    for node, changed in unfence_nodes(kubeconfig, nodes).items():
        typer.echo(f"{node}: {'unfenced' if changed else 'was not fenced'}", err=True)


@app.command("launch")
def launch(
    command: Annotated[
        list[str] | None,
        typer.Argument(metavar="-- COMMAND...", show_default=False,
                       help="The training command, after -- (options before -- are "
                       "launch's own: a mistyped one is an error, never the command)."),
    ] = None,
    checkpoint_dir: Annotated[
        Path | None,
        typer.Option("--checkpoint-dir", help="Directory to watch (default: "
                     "$TRAINMASTER_CHECKPOINT_DIR)."),
    ] = None,
    heartbeat_seconds: Annotated[
        float, typer.Option("--heartbeat-seconds", help="Most frequent heartbeat report.")
    ] = 15.0,
    settle_seconds: Annotated[
        float, typer.Option("--settle-seconds", help="A checkpoint with no marker file counts "
                            "as complete once unchanged this long.")
    ] = 5.0,
    all_ranks: Annotated[
        bool, typer.Option("--all-ranks", help="Report from every rank, not only rank 0.")
    ] = False,
    step_pattern: Annotated[
        str | None, typer.Option("--step-pattern", help="Regular expression whose first "
                                 "group is the training step, matched on each output line "
                                 "(default: $TRAINMASTER_STEP_PATTERN, else step/iteration "
                                 "N); '' reads no steps from the output.")
    ] = None,
    metrics_port: Annotated[
        int | None, typer.Option("--metrics-port", help="Serve Prometheus metrics on this "
                                 "port (default: $TRAINMASTER_METRICS_PORT; none if unset).")
    ] = None,
    metrics_address: Annotated[
        str | None, typer.Option("--metrics-address", help="Address for the metrics "
                                 "(default: $TRAINMASTER_METRICS_ADDRESS, else 127.0.0.1).")
    ] = None,
    kubeconfig: KubeconfigOpt = None,
    context: ContextOpt = None,
) -> None:
    """Run a training command (after --) and report its progress (training steps) and
    checkpoints to its TrainingJob. Exits with the command's exit code."""
    from trainmaster.launch import LaunchConfig, compile_step_pattern, run_launch

    command = list(command or ())
    if not command:
        raise UsageError("give the command to run after --, e.g. "
                         "trainmaster launch -- python train.py")
    config = LaunchConfig.from_env(
        checkpoint_dir=checkpoint_dir,
        heartbeat_seconds=heartbeat_seconds,
        settle_seconds=settle_seconds,
        all_ranks=all_ranks or None,
        kubeconfig=kubeconfig,
        step_pattern=step_pattern,
        metrics_port=metrics_port,
        metrics_address=metrics_address,
    )
    try:
        if config.step_pattern:
            compile_step_pattern(config.step_pattern)
    except ValueError as exc:
        raise UsageError(str(exc)) from None
    raise typer.Exit(run_launch(config, command))


@app.command("launch-bundle")
def launch_bundle(
    directory: Annotated[Path, typer.Argument(help="Directory to write "
                                              "trainmaster-launch.pyz into.")],
) -> None:
    """Write the self-contained launcher (a zipapp that needs only Python in the training
    image) into a directory: what the gang's init container does."""
    from trainmaster.launch import write_bundle

    typer.echo(f"wrote {write_bundle(directory)}", err=True)
