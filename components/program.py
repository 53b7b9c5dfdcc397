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
from trainmaster.spec import SpecError, load_spec

__all__ = ["program"]


def program(project_dir: Path) -> None:
    """Register the TrainingCluster of the stack's spec.

    `project_dir` is explicit because an inline program has no `__file__` of its own and
    the SDK does not pass the project's root directory to inline programs.
    """
    config = pulumi.Config("trainmaster")
    spec_path = project_dir / config.require("spec")
    try:
        spec = load_spec(spec_path)
    except SpecError as exc:
        # Stop before any resource is registered, with the validation errors as the message.
        raise pulumi.RunError(str(exc)) from None

    cluster = TrainingCluster(
        spec.metadata.name, TrainingClusterArgs(spec=spec, kubeconfig=config.get("kubeconfig"))
    )
    pulumi.export("namespace", cluster.namespace)
    pulumi.export("schedulerName", cluster.scheduler_name)
    pulumi.export("jobs", cluster.job_names)
