"""TrainingCluster: every Kubernetes object of a cluster spec, as Pulumi resources."""

from __future__ import annotations

import pulumi
import pulumi_kubernetes as k8s

from components._component import ObjectsComponent
from trainmaster.objects import build_all, object_key
from trainmaster.spec import ClusterSpec

__all__ = ["TrainingCluster", "TrainingClusterArgs"]

TOKEN = "trainmaster:k8s:TrainingCluster"
# Component type per part of build_all(); the order is the apply order.
PART_TOKENS = {
    "crds": "trainmaster:k8s:CustomResourceDefinitions",
    "namespace": "trainmaster:k8s:Namespace",
    "networks": "trainmaster:k8s:Networks",
    "scheduler": "trainmaster:k8s:Scheduler",
    "operator": "trainmaster:k8s:Operator",
    "cache": "trainmaster:k8s:DatasetCache",
    "monitoring": "trainmaster:k8s:Monitoring",
    "jobs": "trainmaster:k8s:TrainingJobs",
    "ui": "trainmaster:k8s:UI",
}


class TrainingClusterArgs:
    """Arguments of TrainingCluster."""

    def __init__(
        self,
        *,
        spec: ClusterSpec,
        kubeconfig: str | None = None,
        keep_crds: frozenset[str] = frozenset(),
        skip_objects: frozenset[str] = frozenset(),
    ) -> None:
        self.spec = spec
        """The validated cluster spec (trainmaster.spec.load_spec)."""
        self.kubeconfig = kubeconfig
        """Kubeconfig file contents or path for an explicit provider; None: the ambient one."""
        self.keep_crds = keep_crds
        """Third-party CRDs the cluster already has from another manager: not registered,
        so Pulumi never overwrites (nor, on destroy, deletes) them."""
        self.skip_objects = skip_objects
        """Objects (`object_key`) of an operator the cluster lacks (`thirdPartyCrds:
        Skip`): not registered."""


class TrainingCluster(pulumi.ComponentResource):
    """The cluster's CRDs, namespace, networks, scheduler, operator, cache, monitoring and
    TrainingJobs, each part a child component."""

    parts: dict[str, ObjectsComponent]
    namespace: pulumi.Output[str]
    scheduler_name: pulumi.Output[str]
    job_names: pulumi.Output[list[str]]

    def __init__(
        self, name: str, args: TrainingClusterArgs, opts: pulumi.ResourceOptions | None = None
    ) -> None:
        super().__init__(TOKEN, name, {}, opts)
        spec = args.spec
        provider = None
        if args.kubeconfig is not None:
            provider = k8s.Provider(
                f"{name}-k8s", kubeconfig=args.kubeconfig, opts=pulumi.ResourceOptions(parent=self)
            )
        objects = build_all(spec)
        objects["crds"] = [
            crd for crd in objects["crds"] if crd["metadata"]["name"] not in args.keep_crds
        ]
        objects = {part: [o for o in objs if object_key(o) not in args.skip_objects]
                   for part, objs in objects.items()}
        self.parts = {}
        # CRDs and the namespace first: every other object needs one of them to exist.
        foundation: list[pulumi.Resource] = []
        for part, token in PART_TOKENS.items():
            depends_on = [] if part in ("crds", "namespace") else list(foundation)
            child_opts = pulumi.ResourceOptions(provider=provider, depends_on=depends_on)
            component = ObjectsComponent(
                token,
                f"{name}-{part}",
                objects.get(part, []),
                pulumi.ResourceOptions(parent=self),
                child_opts,
            )
            self.parts[part] = component
            if part in ("crds", "namespace"):
                foundation.extend(component.objects)
        self.namespace = pulumi.Output.from_input(spec.metadata.namespace)
        self.scheduler_name = pulumi.Output.from_input(spec.scheduler.name)
        self.job_names = pulumi.Output.from_input([job.name for job in spec.jobs])
        self.register_outputs(
            {
                "namespace": self.namespace,
                "schedulerName": self.scheduler_name,
                "jobNames": self.job_names,
            }
        )
