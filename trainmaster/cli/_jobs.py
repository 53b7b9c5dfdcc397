"""`trainmaster jobs list|suspend|resume`: a team's self-service on its TrainingJobs.

Suspend and resume set `spec.suspend` (a JSON merge patch, like `kubectl patch`); the
operator does the rest: a suspended job's gang (Job, pods, PodGroup) is deleted and its
checkpoint kept, a resumed one gets a new gang from the newest checkpoint
(docs/operator.md, "Suspend and resume"; docs/queues.md)."""

from __future__ import annotations

import json
import sys
from typing import TYPE_CHECKING, Annotated, Any

import typer

from trainmaster.cli._app import ClusterOpt, ContextOpt, KubeconfigOpt, app, say_target
from trainmaster.errors import TrainmasterError, UsageError

if TYPE_CHECKING:
    from pathlib import Path

    from trainmaster.kubeclient import SyncKube

jobs_app = typer.Typer(
    help="List, suspend and resume TrainingJobs (a team's self-service).",
    no_args_is_help=True,
)
app.add_typer(jobs_app, name="jobs")

NamespaceOpt = Annotated[
    str | None,
    typer.Option("--namespace", "-n", metavar="NAMESPACE",
                 help="The job's namespace (default: found by name in every namespace)."),
]
WaitOpt = Annotated[
    float,
    typer.Option("--wait", metavar="SECONDS", min=0,
                 help="Wait up to this long for the operator to act (0: do not wait)."),
]


class JobNotFound(TrainmasterError):
    """No TrainingJob of that name: exit 1."""


def _suspended(job: dict[str, Any]) -> bool:
    """What the operator has done (status), not what was asked (spec)."""
    for cond in (job.get("status") or {}).get("conditions") or []:
        if isinstance(cond, dict) and cond.get("type") == "Suspended":
            return cond.get("status") == "True"
    return False


def _row(job: dict[str, Any]) -> dict[str, Any]:
    meta, spec, status = job["metadata"], job.get("spec") or {}, job.get("status") or {}
    checkpoint = status.get("lastCheckpoint") or {}
    return {
        "namespace": meta["namespace"],
        "name": meta["name"],
        "queue": spec.get("queue", "default"),
        "nodes": spec.get("nodes"),
        "phase": status.get("phase") or "New",
        "suspend": bool(spec.get("suspend")),
        "suspended": _suspended(job),
        "restarts": status.get("restarts", 0),
        "checkpoint": checkpoint.get("path"),
        "step": checkpoint.get("step"),
    }


def _find(kube: SyncKube, name: str, namespace: str | None) -> dict[str, Any]:
    from trainmaster.kubeclient import ApiError, trainingjob_path

    if namespace is not None:
        try:
            return kube.run(kube.kube.get(trainingjob_path(namespace, name)))
        except ApiError as exc:
            if exc.status == 404:
                raise JobNotFound(f"no TrainingJob {name} in namespace {namespace} "
                                  "(`trainmaster jobs list`)") from None
            raise
    try:
        everywhere = kube.run(kube.kube.list(trainingjob_path()))
    except ApiError as exc:
        if exc.status == 403:  # a team's rights end at its namespace
            raise UsageError(f"cannot look for {name} in every namespace (403 Forbidden): "
                             "give its namespace with -n NAMESPACE") from None
        raise
    found = [j for j in everywhere if j["metadata"]["name"] == name]
    if not found:
        raise JobNotFound(f"no TrainingJob {name} in any namespace (`trainmaster jobs list`)")
    if len(found) > 1:
        spaces = ", ".join(sorted(j["metadata"]["namespace"] for j in found))
        raise UsageError(f"TrainingJob {name} exists in several namespaces ({spaces}): "
                         "choose one with -n NAMESPACE")
    return found[0]


@jobs_app.command("list")
def list_jobs(
    namespace: Annotated[str | None, typer.Option(
        "--namespace", "-n", metavar="NAMESPACE",
        help="Only this namespace (default: every namespace).")] = None,
    as_json: Annotated[bool, typer.Option("--json", help="Print JSON only.")] = False,
    kubeconfig: KubeconfigOpt = None,
    context: ContextOpt = None,
    cluster_name: ClusterOpt = None,
) -> None:
    """Every TrainingJob: queue, nodes, phase, whether it is suspended, restarts and its
    newest checkpoint."""
    from trainmaster.kubeclient import SyncKube, trainingjob_path

    say_target(kubeconfig, "jobs list")
    with SyncKube.connect(kubeconfig) as kube:
        items = kube.run(kube.kube.list(trainingjob_path(namespace)))
    rows = sorted((_row(j) for j in items), key=lambda r: (r["namespace"], r["name"]))
    if as_json:
        print(json.dumps(rows, indent=2))
        return
    from rich.table import Table

    from trainmaster.cli._console import stdout_console

    table = Table(title=f"{len(rows)} training job(s)")
    for col in ("namespace", "name", "queue", "nodes", "phase", "suspended", "restarts",
                "checkpoint"):
        table.add_column(col, justify="right" if col in ("nodes", "restarts") else "left")
    for r in rows:
        suspended = ("yes" if r["suspended"] else
                     "asked" if r["suspend"] else "resuming" if r["phase"] == "Suspended"
                     else "no")
        step = f" (step {r['step']})" if r["step"] is not None else ""
        table.add_row(r["namespace"], r["name"], r["queue"], str(r["nodes"]), r["phase"],
                      suspended, str(r["restarts"]), f"{r['checkpoint'] or '-'}{step}")
    stdout_console().print(table)


def _set_suspend(name: str, namespace: str | None, suspend: bool, wait: float,
                 kubeconfig: Path | None) -> None:
    from trainmaster.kubeclient import SyncKube, trainingjob_path
    from trainmaster.polling import WaitTimeout, wait_until

    verb = "suspend" if suspend else "resume"
    say_target(kubeconfig, f"jobs {verb}")
    with SyncKube.connect(kubeconfig) as kube:
        job = _find(kube, name, namespace)
        ns = job["metadata"]["namespace"]
        path = trainingjob_path(ns, name)
        if bool((job.get("spec") or {}).get("suspend")) == suspend:
            print(f"{ns}/{name} is already {'suspended' if suspend else 'not suspended'}",
                  file=sys.stderr)
        else:
            # Merge patch of spec.suspend only: a later `apply` of the spec (which leaves
            # suspend out unless the spec sets it) does not undo it.
            kube.run(kube.kube.patch(path, {"spec": {"suspend": suspend}}))
            checkpoint = ((job.get("status") or {}).get("lastCheckpoint") or {}).get("path")
            if suspend:
                kept = f"checkpoint {checkpoint} is kept" if checkpoint else \
                    "no checkpoint was reported yet: a resume starts from the beginning"
                print(f"suspended {ns}/{name}: the operator deletes its gang; {kept} "
                      f"(`trainmaster jobs resume {name}`)", file=sys.stderr)
            else:
                print(f"resumed {ns}/{name}: the operator creates a new gang from its newest "
                      "checkpoint", file=sys.stderr)
        if wait <= 0:
            return

        def acted() -> dict[str, Any] | None:
            now = kube.run(kube.kube.get(path))
            done = _suspended(now) == suspend and (
                suspend or (now.get("status") or {}).get("phase") != "Suspended")
            return now if done else None

        try:
            now = wait_until(acted, f"the operator to {verb} {ns}/{name}", wait, 0.5)
        except WaitTimeout:
            raise TrainmasterError(
                f"the operator did not {verb} {ns}/{name} within {wait:g}s: is it running "
                f"and serving namespace {ns}? (`kubectl -n {ns} describe tj {name}`)"
            ) from None
        print(f"{ns}/{name}: phase {(now.get('status') or {}).get('phase')}",
              file=sys.stderr)


@jobs_app.command("suspend")
def suspend_job(
    name: Annotated[str, typer.Argument(metavar="NAME", help="The TrainingJob.")],
    namespace: NamespaceOpt = None,
    wait: WaitOpt = 0,
    kubeconfig: KubeconfigOpt = None,
    context: ContextOpt = None,
    cluster_name: ClusterOpt = None,
) -> None:
    """Suspend a job (spec.suspend=true): the operator deletes its gang (Job, pods,
    PodGroup), freeing its GPUs and its place in the queue, and keeps its checkpoint."""
    _set_suspend(name, namespace, True, wait, kubeconfig)


@jobs_app.command("resume")
def resume_job(
    name: Annotated[str, typer.Argument(metavar="NAME", help="The TrainingJob.")],
    namespace: NamespaceOpt = None,
    wait: WaitOpt = 0,
    kubeconfig: KubeconfigOpt = None,
    context: ContextOpt = None,
    cluster_name: ClusterOpt = None,
) -> None:
    """Resume a suspended job (spec.suspend=false): the operator creates a new gang that
    resumes from the newest checkpoint (not counted against maxRestarts)."""
    _set_suspend(name, namespace, False, wait, kubeconfig)
