"""API groups, versions and kinds trainmaster serves, writes or reads.

Like Kueue's ``constants.go``: the one place the names of the wire contract are spelled.
"""

from __future__ import annotations

from typing import Final, Literal

GROUP: Final = "trainmaster.io"
"""trainmaster's API group (TrainingJob, the spec's apiVersion, the annotation prefix)."""
VERSION: Final = "v1alpha1"
API_VERSION: Final = "trainmaster.io/v1alpha1"
"""group/version of a TrainingJob and of a spec file."""
SpecApiVersion = Literal["trainmaster.io/v1alpha1"]
"""API_VERSION as a type: the spec model's `apiVersion` field (a Literal cannot name a
variable, so the string is written twice here and a test keeps the two equal)."""
CLUSTER_KIND: Final = "TrainingCluster"
"""The kind of a spec file (not served by an API server)."""
SPEC_SCHEMA_ID: Final = "https://trainmaster.io/schemas/cluster.schema.json"
"""The $id of the spec's JSON Schema."""

TRAININGJOB_KIND: Final = "TrainingJob"
TRAININGJOB_PLURAL: Final = "trainingjobs"
TRAININGJOB_SHORT_NAMES: Final = ("tj",)

LOCALQUEUE_KIND: Final = "LocalQueue"
"""A namespaced queue (Kueue's LocalQueue, in trainmaster's group): `spec.clusterQueue`
names the scheduler's queue (Kueue's ClusterQueue) that the namespace's work is charged
to. Pods name it by QUEUE_LABEL."""
LOCALQUEUE_PLURAL: Final = "localqueues"
LOCALQUEUE_SHORT_NAMES: Final = ("lq",)

PODGROUP_GROUP: Final = "scheduling.x-k8s.io"
"""scheduler-plugins' coscheduling PodGroup, which trainmaster-scheduler reads."""
PODGROUP_VERSION: Final = "v1alpha1"
PODGROUP_API_VERSION: Final = "scheduling.x-k8s.io/v1alpha1"
PODGROUP_KIND: Final = "PodGroup"
PODGROUP_PLURAL: Final = "podgroups"

WORKLOAD_GROUP: Final = "scheduling.k8s.io"
"""The upstream gang API (Kubernetes 1.35+: Workload, PodGroup, a pod's
``spec.schedulingGroup``), which trainmaster-scheduler reads too (docs/interop.md)."""
WORKLOAD_API_VERSION: Final = "scheduling.k8s.io/v1beta1"
"""The version read: beta in Kubernetes 1.37, behind the GenericWorkload gate."""
COMPOSITE_API_VERSION: Final = "scheduling.k8s.io/v1alpha3"
"""The version of the CompositePodGroup object: alpha in Kubernetes 1.37, behind the
CompositePodGroup gate (v1beta1 has no CompositePodGroup)."""

CRD_API_VERSION: Final = "apiextensions.k8s.io/v1"

FIELD_MANAGER: Final = "trainmaster"
"""Server-side apply field manager of everything trainmaster applies."""
REPORTING_COMPONENT_PREFIX: Final = "trainmaster.io/"
"""An Event's reportingComponent is this followed by the component's name."""
KUBECONFIG_STATE_EXTENSION: Final = "trainmaster.io/state-dir"
"""The kubeconfig cluster extension that names a local cluster's state directory."""
