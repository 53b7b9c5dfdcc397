"""`trainmaster render`: the spec's objects as YAML, for Argo CD / Flux users."""

from __future__ import annotations

from pathlib import Path
from typing import TYPE_CHECKING, Annotated

import typer

from trainmaster.cli._app import app
from trainmaster.errors import UsageError

if TYPE_CHECKING:
    from trainmaster.spec import ClusterSpec


@app.command()
def render(
    spec: Annotated[Path, typer.Argument(metavar="SPEC",
                                         help="Cluster spec file ('-': standard input).")],
    output: Annotated[
        Path | None,
        typer.Option("-o", "--output", metavar="FILE",
                     help="Write all objects to this file instead of standard output."),
    ] = None,
    output_dir: Annotated[
        Path | None,
        typer.Option("--output-dir", metavar="DIR",
                     help="Write a folder instead: one file per component and a "
                     "kustomization.yaml (our files are replaced, nothing else)."),
    ] = None,
    jobs: Annotated[
        bool,
        typer.Option("--jobs", help="Print what will run instead: each job's TrainingJob and "
                     "its first gang as the operator creates it and `policy check` judges it "
                     "(ServiceAccount, Role, RoleBinding, NetworkPolicy, Service, the "
                     "launch script's ConfigMap, PodGroup, Indexed Job with its resolved "
                     "environment and resources)."),
    ] = False,
    job: Annotated[
        list[str] | None,
        typer.Option("--job", metavar="NAME", help="Only this job (repeatable; implies "
                     "--jobs)."),
    ] = None,
) -> None:
    """Write the Kubernetes objects of a spec: the same objects Pulumi and the operator use.
    With --jobs: what will run for each job."""
    if output is not None and output_dir is not None:
        raise UsageError("give -o FILE or --output-dir DIR, not both")
    if (jobs or job) and output_dir is not None:
        raise UsageError("--jobs prints one YAML stream: give -o FILE or nothing, not "
                         "--output-dir")
    if output_dir is not None and output_dir.exists() and not output_dir.is_dir():
        raise UsageError(f"--output-dir {output_dir} is a file; give a folder "
                         "(or -o FILE for one YAML file)")
    if output is not None and output.is_dir():
        raise UsageError(f"-o {output} is a folder; give a file (or --output-dir DIR)")
    from trainmaster.cli._input import read_spec
    from trainmaster.objects import all_objects, render_to_dir, to_yaml

    cluster = read_spec(spec)
    if jobs or job:
        text = jobs_text(cluster, job or [])
    elif output_dir is not None:
        for path in render_to_dir(cluster, output_dir):
            typer.echo(f"wrote {path}", err=True)
        return
    else:
        text = to_yaml(all_objects(cluster))
    if output is None:
        print(text, end="")
        return
    output.write_text(text)
    typer.echo(f"wrote {output}", err=True)


def jobs_text(cluster: ClusterSpec, names: list[str]) -> str:
    """`render --jobs`: the named jobs' objects (every job's when none is named)."""
    from trainmaster.objects import jobs_yaml

    known = [j.name for j in cluster.jobs]
    unknown = [n for n in names if n not in known]
    if unknown:
        raise UsageError(f"--job {unknown[0]}: the spec has no such job (jobs: "
                         f"{', '.join(known) or 'none'})")
    if not known:
        raise UsageError("--jobs: the spec has no jobs to show; add one under `jobs:` "
                         "(docs/spec.md)")
    return jobs_yaml(cluster, [j for j in cluster.jobs if not names or j.name in names])
