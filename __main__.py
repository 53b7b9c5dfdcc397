"""The Pulumi program: the stack's spec file becomes a TrainingCluster.

Config: `trainmaster:spec` (path of the spec, relative to this folder) and optionally
`trainmaster:kubeconfig` (default: the ambient kubeconfig / $KUBECONFIG).
"""

from __future__ import annotations

from pathlib import Path

import pulumi

from components import TrainingCluster, TrainingClusterArgs
from trainmaster.spec import SpecError, load_spec

config = pulumi.Config("trainmaster")
spec_path = Path(__file__).parent / config.require("spec")
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
