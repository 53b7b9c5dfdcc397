"""`trainmaster status`: the workload on a cluster (trainmaster.status)."""

from __future__ import annotations

import json
import sys
from typing import Annotated

import typer

from trainmaster.cli._app import ClusterOpt, ContextOpt, KubeconfigOpt, app, say_target


@app.command("status")
def status(
    kubeconfig: KubeconfigOpt = None,
    context: ContextOpt = None,
    cluster_name: ClusterOpt = None,
    namespace: Annotated[
        str | None, typer.Option("--namespace", "-n", help="Only jobs of this namespace.")
    ] = None,
    as_json: Annotated[bool, typer.Option("--json", help="Print JSON only.")] = False,
    prometheus: Annotated[str | None, typer.Option(
        "--prometheus", help="Prometheus base URL for each job's live step, step rate and "
        "time since its last checkpoint. Default: the Prometheus operator's Prometheus pod "
        "in the cluster, if any; `off`: none (the TrainingJobs' status only).")] = None,
) -> None:
    """The workload on any cluster: GPUs used/free per switch, queues (with each queue's
    fair share against its entitlement in the cohort tree), training jobs (phase,
    restarts, checkpoint, age; with a Prometheus, live step, steps/s and time since the
    last checkpoint), fenced nodes, and every gang the scheduler has not placed yet
    (TrainingJobs' and other PodGroups') with the reason. For the local control
    plane's own processes and nodes: `trainmaster cluster status`."""
    say_target(kubeconfig, "status")
    from trainmaster.status import collect_view, render_view

    view = collect_view(kubeconfig, namespace, prometheus)
    if as_json:
        json.dump(view.to_json(), sys.stdout, indent=2)
        sys.stdout.write("\n")
        return
    from trainmaster.cli._console import stdout_console

    render_view(view, stdout_console())
