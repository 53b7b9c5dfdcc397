"""The Pulumi program: the stack's spec file becomes a TrainingCluster.

One function for both ways the engine runs it: `__main__.py` (a language host starting the
project) and `trainmaster pulumi` (the Automation API serving it inline, in process).

Config: `trainmaster:spec` (path of the spec, relative to the project folder) and optionally
`trainmaster:kubeconfig` (default: the ambient kubeconfig / $KUBECONFIG).
"""

from __future__ import annotations

from pathlib import Path

import pulumi

from components.cluster import TrainingCluster, TrainingClusterArgs
from trainmaster.spec import ClusterSpec, SpecError, load_spec

__all__ = ["program"]


def program(project_dir: Path, ambient_kubeconfig: str | None = None) -> None:
    """Register the TrainingCluster of the stack's spec.

    `project_dir` is explicit because an inline program has no `__file__` of its own and
    the SDK does not pass the project's root directory to inline programs. An inline
    program runs in the caller's process, whose environment is not the engine's: the
    caller passes the engine's $KUBECONFIG as `ambient_kubeconfig`, for the CRD checks.
    """
    config = pulumi.Config("trainmaster")
    spec_path = project_dir / config.require("spec")
    try:
        spec = load_spec(spec_path)
    except SpecError as exc:
        # Stop before any resource is registered, with the validation errors as the message.
        raise pulumi.RunError(str(exc)) from None

    kubeconfig = config.get("kubeconfig")
    keep, skip = _foreign_crds(spec, kubeconfig or ambient_kubeconfig)
    cluster = TrainingCluster(
        spec.metadata.name,
        TrainingClusterArgs(spec=spec, kubeconfig=kubeconfig, keep_crds=frozenset(keep),
                            skip_objects=frozenset(skip)),
    )
    pulumi.export("namespace", cluster.namespace)
    pulumi.export("schedulerName", cluster.scheduler_name)
    pulumi.export("jobs", cluster.job_names)


def _foreign_crds(spec: ClusterSpec, kubeconfig: str | None
                  ) -> tuple[dict[str, str], set[str]]:
    """Third-party CRDs that another manager installed, to leave alone (name -> owner),
    and the objects to leave out (`object_key`s): with `thirdPartyCrds: Skip`, those of an
    operator the cluster lacks, said in the log. Stop early, naming each operator the
    cluster lacks: Multus always (it has no stand-in), the Prometheus operator with
    `thirdPartyCrds: Never`."""
    from trainmaster.apply import (
        foreign_crds,
        missing_operators_message,
        missing_operators_of,
        skipped_objects_of,
    )
    from trainmaster.objects import all_objects

    path = Path(kubeconfig) if kubeconfig and Path(kubeconfig).is_file() else None
    skip_absent = spec.third_party_crds == "Skip"
    skipped: set[str] = set()
    try:
        missing = missing_operators_of(path, all_objects(spec), skip_absent)
        if missing:
            raise pulumi.RunError(missing_operators_message(missing))
        if skip_absent:
            lines, skipped = skipped_objects_of(path, all_objects(spec))
            for line in lines:
                pulumi.log.warn(line)
        if spec.third_party_crds != "IfAbsent":
            return {}, skipped
        owners = foreign_crds(path)
    except pulumi.RunError:
        raise
    except Exception as exc:  # no reachable cluster, no credentials: say how to go on
        raise pulumi.RunError(
            f"cannot check the cluster for Multus/Prometheus-operator CRDs ({exc})"
        ) from None
    for name, owner in owners.items():
        pulumi.log.info(f"kept CustomResourceDefinition/{name}: it belongs to {owner}")
    return owners, skipped
