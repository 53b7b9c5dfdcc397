"""The typed spec model. Defaults live here and only here.

Over 500 lines on purpose: one small pydantic class per object of the spec (about 45),
kept in one module so a field's type, bounds, default and doc, which become the schema,
are read in one place and no class imports another module's half of the tree.

The JSON Schema in ``schemas/cluster.schema.json`` is generated from these classes
(``trainmaster schema``), so field docs, bounds and defaults cannot drift apart. Field
docstrings become the schema's descriptions.
"""

from __future__ import annotations

import re
from collections.abc import Sequence
from dataclasses import dataclass
from functools import cached_property
from typing import Annotated, Any, Literal

from pydantic import BaseModel, ConfigDict, Field, field_validator
from pydantic.alias_generators import to_camel

from trainmaster import __version__
from trainmaster.api import BYTES_PATTERN, SpecApiVersion, default_policy, parse_bytes

Name = Annotated[str, Field(pattern=r"^[a-z0-9]([-a-z0-9]*[a-z0-9])?$", max_length=63)]
LabelKey = Annotated[
    str,
    Field(pattern=r"^([a-z0-9]([-a-z0-9.]*[a-z0-9])?/)?[A-Za-z0-9]([-A-Za-z0-9_.]*[A-Za-z0-9])?$",
          max_length=317),
]
JobName = Annotated[str, Field(pattern=r"^[a-z0-9]([-a-z0-9]*[a-z0-9])?$", max_length=40)]
Quantity = Annotated[str, Field(pattern=BYTES_PATTERN, examples=["512Gi", "15Ti"])]
Cidr = Annotated[
    str,
    Field(pattern=r"^[0-9]{1,3}(\.[0-9]{1,3}){3}/[0-9]{1,2}$", examples=["10.10.0.0/16"]),
]
Mode = Literal["required", "preferred"]
DATASET_SCHEMES = ("file", "http", "https", "s3")
"""The dataset source schemes `trainmaster cache warm` copies from."""
DEFAULT_LEVELS = ("spine", "leaf")


class _Model(BaseModel):
    model_config = ConfigDict(
        alias_generator=to_camel,
        populate_by_name=True,
        extra="forbid",
        frozen=True,
        use_attribute_docstrings=True,
    )


# --- topology ------------------------------------------------------------------------


class NodeShape(_Model):
    """The hardware of a GPU node."""

    gpus: int = Field(8, ge=0, le=64)
    """GPUs in the node (extended resource `nvidia.com/gpu`)."""
    gpu_model: str = "nvidia-h100-80gb"
    """GPU model, recorded in the node label `trainmaster.io/gpu-model`."""
    nics: int = Field(8, ge=0, le=32)
    """RDMA NICs, one per compute-network rail; each is a resource `rdma/<rail>`."""
    cpu: int = Field(128, ge=1, le=4096)
    """CPU cores."""
    memory: Quantity = "2048Gi"
    """Memory, as a Kubernetes quantity."""
    local_disk: Quantity = "15Ti"
    """Node-local NVMe disk, which holds the dataset cache."""
    max_pods: int = Field(110, ge=1, le=1000)
    """Pods the node accepts."""


class NodeOverride(_Model):
    """One node of an explicit node list; unset fields come from `topology.node`."""

    name: Name
    """Node name, unique in the cluster."""
    gpus: int | None = Field(None, ge=0, le=64)
    """GPUs, if not `topology.node.gpus`."""
    gpu_model: str | None = None
    """GPU model, if not `topology.node.gpuModel`."""
    nics: int | None = Field(None, ge=0, le=32)
    """RDMA NICs, if not `topology.node.nics`."""
    cpu: int | None = Field(None, ge=1, le=4096)
    """CPU cores, if not `topology.node.cpu`."""
    memory: Quantity | None = None
    """Memory, if not `topology.node.memory`."""
    local_disk: Quantity | None = None
    """Local disk, if not `topology.node.localDisk`."""
    max_pods: int | None = Field(None, ge=1, le=1000)
    """Pod limit, if not `topology.node.maxPods`."""


class Switch(_Model):
    """A switch of the fabric tree: either it holds lower switches, or (a leaf) nodes."""

    name: Name
    """Switch name, unique in the cluster; it becomes a node label value."""
    switches: list[Switch] | None = Field(None, min_length=1)
    """Switches one level down."""
    nodes: int | list[NodeOverride] | None = None
    """Leaf switches only: a node count (names generated) or an explicit node list."""


class GeneratedTopology(_Model):
    """A regular tree, e.g. 5 spines x 5 leaves x 20 nodes."""

    switches_per_level: list[Annotated[int, Field(ge=1, le=10000)]] = Field(min_length=1)
    """Switch count per level, top first: `[5, 5]` is 5 spines each with 5 leaves."""
    nodes_per_leaf: int = Field(ge=1, le=10000)
    """Nodes under every leaf switch."""


class Topology(_Model):
    """The switch tree (node -> leaf -> spine ...) and the nodes under it."""

    levels: list[Name] = Field(list(DEFAULT_LEVELS), min_length=1, max_length=6)
    """Switch levels from the top down; the last one is the leaf level."""
    node: NodeShape = NodeShape()
    """Hardware of every node unless a node list overrides it."""
    generate: GeneratedTopology | None = None
    """A regular tree; give this or `switches`."""
    switches: list[Switch] | None = Field(None, min_length=1)
    """An explicit tree; give this or `generate`."""
    node_labels: dict[Name, LabelKey] = {}
    """Real clusters: level -> a node label the cluster already has for that level (e.g.
    `leaf: network.topology.kubernetes.io/block` as Kueue's topology-aware scheduling uses,
    or the labels of Volcano HyperNodes). The operator copies its value into
    `topology.trainmaster.io/<level>` on nodes the switch tree does not name. Nodes the
    tree names are labelled from the tree; GPU nodes with neither get a `TopologyUnknown`
    Event."""


# --- networks ------------------------------------------------------------------------


class Rail(_Model):
    """One rail of the compute network: one NIC per node on its own subnet."""

    name: Name | None = None
    """Rail name (default `rail<i>`); the RDMA resource is `rdma/<name>`."""
    subnet: Cidr
    """IPAM range for this rail's interfaces."""
    device: str | None = Field(None, pattern=r"^[A-Za-z0-9_.-]+$")
    """HCA / netdev on the node (default `mlx5_<i>`)."""


class Lossless(_Model):
    """RoCE lossless-Ethernet settings."""

    pfc_priority: int = Field(ge=0, le=7)
    """802.1p priority with PFC enabled for RDMA traffic."""
    ecn: bool = True
    """ECN marking (DCQCN congestion control)."""
    gid_index: int = Field(3, ge=0, le=255)
    """RoCEv2 GID index (NCCL_IB_GID_INDEX)."""
    traffic_class: int = Field(106, ge=0, le=255)
    """IB traffic class for RDMA traffic (NCCL_IB_TC), DSCP << 2."""


class ComputeNetwork(_Model):
    """The RDMA network that carries collective traffic."""

    fabric: Literal["infiniband", "roce"]
    """`infiniband` or `roce`."""
    mtu: int = Field(4096, ge=1280, le=9216)
    """Interface MTU."""
    rails: list[Rail] = Field(min_length=1, max_length=32)
    """One entry per rail; nodes need at least this many NICs."""
    lossless: Lossless | None = None
    """Required for RoCE: PFC priority, ECN and GID index."""


class StorageNetwork(_Model):
    """A separate network to shared storage, kept off the compute rails."""

    subnet: Cidr
    """IPAM range of the storage interfaces."""
    mtu: int = Field(9000, ge=1280, le=9216)
    """Interface MTU."""
    interface: str = Field("eth1", pattern=r"^[A-Za-z0-9_.-]+$")
    """Host interface the storage attachment uses."""
    attach: Literal["all"] | list[Name] = "all"
    """`all`, or the switches and nodes whose nodes attach."""


class Networks(_Model):
    """The compute (RDMA) network and the storage network."""

    compute: ComputeNetwork
    """The RDMA compute network (InfiniBand or RoCE), one subnet per rail."""
    storage: StorageNetwork | None = None
    """The storage network; omit when storage shares the host network."""


# --- scheduler -----------------------------------------------------------------------


class TopologyRule(_Model):
    """Where gangs of a size go: the first rule whose maxNodes covers the job applies."""

    max_nodes: int | None = Field(None, ge=1)
    """Largest job (in nodes) this rule covers; unset covers every size."""
    domain: Name
    """`node`, a level name (e.g. `leaf`) or `cluster`."""
    mode: Mode = "preferred"
    """`required`: wait rather than spread wider; `preferred`: spread if it must."""


def default_topology_policy(levels: Sequence[str]) -> list[TopologyRule]:
    """trainmaster.api.default_policy as the spec's rules: a one-node job on one node;
    larger ones prefer one leaf (the last of `levels`). The spec's default (for its
    default levels); the scheduler reads the same policy from the api."""
    return [
        TopologyRule(max_nodes=r.max_nodes, domain=r.domain, mode=r.mode)  # type: ignore[arg-type]
        for r in default_policy(levels)
    ]


GPU_RESOURCE_NAME = "nvidia.com/gpu"

ResourceAmount = Annotated[
    int | str, Field(union_mode="left_to_right", examples=[8, "64", "500m", "512Gi"])]


class ResourceQuota(_Model):
    """One resource's quota (Kueue's `resources` entry of a flavor): nvidia.com/gpu, cpu,
    memory or an RDMA resource."""

    name: str = Field(pattern=r"^([a-z0-9.-]+/)?[a-z0-9]([-a-z0-9_.]*[a-z0-9])?$",
                      examples=["nvidia.com/gpu", "cpu", "memory", "rdma/rail0"])
    """The resource name, as pods request it."""
    nominal_quota: ResourceAmount = 0
    """How much the queue (or cohort) holds without borrowing (a Kubernetes quantity)."""
    borrowing_limit: ResourceAmount | None = None
    """How much beyond `nominalQuota` it may borrow from its cohort; unset: no limit."""
    lending_limit: ResourceAmount | None = None
    """How much of `nominalQuota` it lends its cohort; unset: all it leaves idle."""


class FairSharingWeight(_Model):
    """Kueue's `fairSharing` of a queue or cohort."""

    weight: float = Field(1.0, gt=0)
    """Its share of what its cohort lends, relative to its siblings' weights."""


class Cohort(_Model):
    """A cohort with a parent, quota of its own and a fair-sharing weight (Kueue's
    Cohort). Cohorts only queues name need not be declared."""

    name: Name
    """Cohort name, which queues name in `cohort` and cohorts in `parent`."""
    parent: Name | None = None
    """The cohort this one borrows from and lends to (cohorts form a tree)."""
    resources: list[ResourceQuota] = []
    """Quota of the cohort itself, lent to every queue below it."""
    fair_sharing: FairSharingWeight = FairSharingWeight()
    """Its weight against its sibling cohorts and queues."""


class FairSharingConfig(_Model):
    """Kueue's `fairSharing` scheduler settings (and Admission Fair Sharing's half-life)."""

    enable: bool = False
    """Admit borrowing work, and preempt between borrowers, by dominant resource share."""
    preemption_strategies: list[Literal["LessThanOrEqualToFinalShare",
                                        "LessThanInitialShare"]] = [
        "LessThanOrEqualToFinalShare", "LessThanInitialShare"]
    """Kueue's strategies, tried in order."""
    usage_half_life_seconds: float | None = Field(None, gt=0)
    """Order admission by usage decayed with this half-life (usage over time) instead of
    usage now; unset: usage now."""


class Queue(_Model):
    """A queue with a GPU quota (Kueue's ClusterQueue names), a priority and a preemption
    switch. trainmaster-scheduler enforces the quota when it admits a gang."""

    name: Name
    """Queue name; also the name of its PriorityClass suffix."""
    nominal_quota: int | None = Field(None, ge=0)
    """GPUs the queue's jobs may hold at once without borrowing; unset is unlimited."""
    gpu_quota: int | None = Field(None, ge=0)
    """Old name of `nominalQuota`, still accepted; set one of them."""
    cohort: Name | None = None
    """Queues of one cohort lend each other the part of their nominal quota they leave
    idle, and (with `scheduler.preemption`) take it back by preemption when they need it."""
    borrowing_limit: int | None = Field(None, ge=0)
    """GPUs beyond `nominalQuota` the queue may borrow from its cohort; unset is as much
    as the cohort has idle. Needs `cohort`."""
    lending_limit: int | None = Field(None, ge=0)
    """GPUs of `nominalQuota` the queue lends its cohort; unset: all it leaves idle."""
    resources: list[ResourceQuota] = []
    """Quotas of other resources (cpu, memory, rdma/...); a resource without one is not
    counted against the queue. `nvidia.com/gpu` may be set here instead of
    `nominalQuota`."""
    fair_sharing: FairSharingWeight = FairSharingWeight()
    """Its weight against the other queues and cohorts of its cohort."""
    priority: int = Field(0, ge=0, le=1_000_000_000)
    """Priority of the queue's PriorityClass (its jobs' priority unless they set one)."""
    preemption: bool = True
    """With `scheduler.preemption`, this queue's jobs may preempt lower-priority gangs;
    false switches it off for this queue."""
    priority_classes: list[Name] = Field(default_factory=list, max_length=64)
    """PriorityClasses the queue's GPU pods, Jobs and TrainingJobs may name besides its
    own (`<cluster>-<queue>` and the `<cluster>-<queue>-p<priority>` classes its spec jobs
    render); empty: its own only. The admission guardrails refuse any other class in the
    namespaces whose GPU work the scheduler places (docs/security.md). `system-*` classes
    are the platform's and cannot be listed."""

    @property
    def quota(self) -> int | None:
        """The GPU nominal quota, whichever of its three places set it."""
        if self.nominal_quota is not None:
            return self.nominal_quota
        if self.gpu_quota is not None:
            return self.gpu_quota
        for r in self.resources:
            if r.name == GPU_RESOURCE_NAME and isinstance(r.nominal_quota, int):
                return r.nominal_quota
        return None


class LocalQueueSpec(_Model):
    """A LocalQueue object's `spec` (its CRD's schema is generated from this model)."""

    cluster_queue: Name
    """The scheduler queue (`scheduler.queues[].name`, Kueue's ClusterQueue) its work is
    charged to."""


class LocalQueue(LocalQueueSpec):
    """A namespaced queue (Kueue's LocalQueue): a team submits from its own namespace by
    naming it in the `kueue.x-k8s.io/queue-name` label, and its work is charged to the
    scheduler queue `clusterQueue`. Rendered as a LocalQueue object in `namespace`."""

    name: Name
    """The LocalQueue's name, which the pods and PodGroups of its namespace name in their
    queue label (`default`: also the queue of their unlabelled work)."""
    namespace: Name
    """The team's namespace: one of `scheduler.namespaces` (not the cluster's namespace,
    whose jobs name scheduler queues directly). Like those, it must exist before apply."""


class SchedulerSpec(_Model):
    """trainmaster-scheduler settings."""

    name: Name = "trainmaster-scheduler"
    """schedulerName that training pods carry."""
    gang_timeout_seconds: int = Field(300, ge=1, le=86400)
    """Seconds a gang may stay unschedulable before it is starving: it then reserves the
    domain it needs, and gangs behind it may no longer backfill there."""
    preemption: bool = True
    """Let higher-priority gangs evict whole lower-priority gangs (and lenders take back
    their quota from borrowers); the queues' PriorityClasses get `PreemptLowerPriority`.
    false is the opt-out: nothing is ever evicted, and borrowed quota comes back only as
    borrowers finish."""
    topology_policy: list[TopologyRule] = default_topology_policy(DEFAULT_LEVELS)
    """Rules by job size, first match wins."""
    queues: list[Queue] = [Queue(name="default")]
    """Queues jobs name in `jobs[].queue`."""
    cohorts: list[Cohort] = []
    """Cohorts with a parent, quota or weight (hierarchical cohorts)."""
    fair_sharing: FairSharingConfig = FairSharingConfig()
    """Fair sharing between borrowers (off by default)."""
    replicas: int = Field(2, ge=1, le=5)
    """Scheduler replicas (one leads through a Lease)."""
    bind_concurrency: int = Field(64, ge=1, le=1024)
    """Binding API calls in flight at once."""
    client_qps: int = Field(500, ge=1, le=100000)
    """Client-side API rate limit."""
    namespaces: list[Name] = Field(default_factory=list, max_length=64)
    """Namespaces whose pods the scheduler binds, besides the cluster's namespace (always
    served). It gets bind rights (a RoleBinding) in each, which must exist before apply; a
    pod naming this scheduler anywhere else stays pending with a `NamespaceNotServed`
    Event and PodScheduled condition."""
    local_queues: list[LocalQueue] = Field(default_factory=list, max_length=256)
    """Namespaced queues of the teams (Kueue's LocalQueues). With any set, a pod in a
    served namespace other than the cluster's names a LocalQueue of its namespace (it
    waits with a `LocalQueueNotFound` Event and PodScheduled condition otherwise), and
    each such namespace gets a Role for its users."""


# --- cache ---------------------------------------------------------------------------


class Toleration(_Model):
    """A Kubernetes toleration (core/v1 `Toleration`, without `tolerationSeconds`)."""

    key: str | None = Field(None, min_length=1, max_length=316)
    """Taint key; omit with `operator: Exists` to tolerate every taint."""
    operator: Literal["Exists", "Equal"] = "Equal"
    """`Equal` matches `value`; `Exists` matches any value."""
    value: str | None = Field(None, max_length=63)
    """Taint value, for `operator: Equal`."""
    effect: Literal["NoSchedule", "PreferNoSchedule", "NoExecute"] | None = None
    """Taint effect; omit to tolerate every effect."""


class Dataset(_Model):
    """A dataset that jobs read and the node cache holds."""

    name: Name
    """Dataset name, which jobs list in `datasets`."""
    source: str = Field(pattern=r"^[a-z][a-z0-9+.-]*://\S+$", examples=["s3://corpus/c4"])
    """Where the dataset lives, as a URI."""
    size: Quantity
    """Size of the dataset."""
    volume: Name | None = None
    """A PersistentVolumeClaim (in the cluster's namespace) that holds a `file://` source:
    mounted read-only into the warm-up pods at the source's path, e.g. a CSI-mounted bucket
    or an NFS share. Omit for http(s) sources and for paths the warm-up image already has."""
    credentials_secret: Name | None = None
    """For an `s3://` source: a Secret (in the cluster's namespace) whose keys
    `AWS_ACCESS_KEY_ID`, `AWS_SECRET_ACCESS_KEY` and optional `AWS_SESSION_TOKEN` the
    warm-up pods get as those variables. Credentials never go in the spec; omit to use
    the node's or pod's own identity."""
    endpoint: str | None = Field(None, pattern=r"^https?://[^\s/]+(/\S*)?$",
                                 examples=["http://rgw.storage.svc:7480"])
    """For an `s3://` source: the S3 endpoint URL of an on-prem store (Ceph RGW,
    SeaweedFS, MinIO, versitygw), given to the warm-up pods as `AWS_ENDPOINT_URL`; omit for
    AWS S3."""
    region: str | None = Field(None, pattern=r"^[a-z0-9-]{1,32}$")
    """For an `s3://` source: `AWS_REGION` of the warm-up pods."""


class CacheSpec(_Model):
    """The node-local dataset cache."""

    medium: Literal["nvme", "memory", "disk"] = "nvme"
    """What backs the cache on each node."""
    path: str = Field("/mnt/trainmaster-cache", pattern=r"^/")
    """Host path of the cache."""
    capacity: Quantity = "4Ti"
    """Cache size per node; must fit the node's local disk."""
    warmup: bool = True
    """Fill the cache before a job that uses the dataset starts."""
    wait_for_warmup: bool = True
    """With `warmup`: the operator holds a job that names datasets until each is ready on at
    least as many nodes the job can use as the job has pods (at most `warmupTimeoutMinutes`);
    `false` starts it at once (warm-up optional: the job reads whatever the cache holds,
    uncached where it is cold)."""
    warmup_timeout_minutes: int = Field(120, ge=1, le=10080)
    """With `waitForWarmup`: a job still held for its datasets this long after it was first
    held fails with reason `WarmupTimeout` (and the last warm-up error, if any), so no job
    waits forever. Raise it for datasets that take longer to copy."""
    datasets: list[Dataset] = []
    """Datasets jobs may name."""
    node_selector: dict[str, str] = {}
    """Node labels a node needs for its cache to be filled, besides being a node that a job
    reading the dataset may use; empty: every such node."""
    tolerations: list[Toleration] = []
    """Taints the warm-up pods tolerate besides those the jobs that read the dataset
    tolerate (which they always do); they do not make a node warmed."""


# --- monitoring ----------------------------------------------------------------------


class Alerts(_Model):
    """Alert thresholds."""

    xid_errors: bool = True
    """Alert on any GPU Xid error."""
    ecc_errors_per_hour: int = Field(1, ge=1)
    """Double-bit ECC errors per hour that fire an alert."""
    no_progress_minutes: int = Field(30, ge=1)
    """Minutes without a training heartbeat before alerting."""
    node_not_ready_minutes: int = Field(5, ge=1)
    """Minutes a node may be NotReady before alerting."""


class GpuExporter(_Model):
    """The GPU metrics exporter DaemonSet."""

    enabled: bool = True
    """Run the exporter on every GPU node."""
    image: str = "nvcr.io/nvidia/k8s/dcgm-exporter:4.2.3-4.1.3-ubuntu22.04"
    """Exporter image."""


class NicAgent(_Model):
    """The NIC health agent DaemonSet: reads each GPU node's InfiniBand/RoCE ports from
    sysfs and sets the node condition `NICHealthy`, on which the operator fences."""

    enabled: bool = True
    """Run the agent on every GPU node."""
    interval_seconds: int = Field(5, ge=1, le=3600)
    """Seconds between two looks at the ports (sysfs reads, no API call): a dead rail is
    fenced at most this long after it went down, plus the operator's reaction."""
    heartbeat_seconds: int = Field(30, ge=1, le=3600)
    """The condition is written when the verdict changes and otherwise this often (its
    `lastHeartbeatTime`): the agent's API traffic, two requests per node per heartbeat."""
    sysfs_path: str = Field("/sys", pattern=r"^/")
    """Host folder mounted (read-only) as the agent's sysfs: `/sys`, or a tree laid out as
    sysfs (`class/infiniband/<device>/ports/<n>/state`, ...), as the real-node test uses."""
    node_selector: dict[str, str] = {"nvidia.com/gpu.present": "true"}
    """Node labels the agent's pods require (the DaemonSet's `nodeSelector`): the GPU
    nodes by default; `trainmaster demo` runs it on the local real nodes
    (`trainmaster.io/real-node: "true"`)."""


class MonitoringSpec(_Model):
    """GPU metrics, alerts and dashboards (Prometheus operator objects)."""

    gpu_exporter: GpuExporter = GpuExporter()
    """The GPU metrics exporter."""
    nic_agent: NicAgent = NicAgent()
    """The NIC health agent (node condition `NICHealthy`)."""
    scrape_interval_seconds: int = Field(15, ge=1, le=3600)
    """Prometheus scrape interval."""
    alerts: Alerts = Alerts()
    """Alert thresholds (PrometheusRule)."""
    dashboards: bool = True
    """Ship a Grafana dashboard ConfigMap."""
    scrape_namespace: Name = "monitoring"
    """Namespace of the Prometheus that scrapes the metrics: the NetworkPolicies admit
    metrics scrapes from its pods and from nowhere else."""


# --- image ---------------------------------------------------------------------------


class ImageSpec(_Model):
    """The trainmaster image, which the scheduler, the operator and cache warm-ups run."""

    registry: str = Field(
        "trainmaster.local", pattern=r"^[a-z0-9]([-a-z0-9.:]*[a-z0-9])?(/[a-z0-9._-]+)*$"
    )
    """Registry host, optionally with a path. The default names the image that `trainmaster
    image build` makes and loads into the nodes; no registry serves it."""
    repository: str = Field("trainmaster", pattern=r"^[a-z0-9]+([._/-][a-z0-9]+)*$")
    """Repository in the registry."""
    tag: str = Field(__version__, pattern=r"^[A-Za-z0-9_][A-Za-z0-9_.-]{0,127}$")
    """Image tag; the default is trainmaster's version."""
    digest: str | None = Field(None, pattern=r"^sha256:[a-f0-9]{64}$")
    """Pin by digest instead of tag (`sha256:<64 hex>`)."""
    pull_policy: Literal["Always", "IfNotPresent", "Never"] = "IfNotPresent"
    """imagePullPolicy: `IfNotPresent` uses an image already on the node (a local build);
    `Never` never contacts a registry; `Always` re-pulls a moving tag."""

    @property
    def reference(self) -> str:
        """The full image reference, e.g. `trainmaster.local/trainmaster:0.1.0`."""
        base = f"{self.registry}/{self.repository}"
        return f"{base}@{self.digest}" if self.digest else f"{base}:{self.tag}"


# --- system placement --------------------------------------------------------------


class SystemPlacement(_Model):
    """Which nodes trainmaster's own controllers (the scheduler, the operator and the in-cluster
    UI) run on."""

    node_selector: dict[str, str] = {}
    """Node labels their pods require (pod `nodeSelector`); empty: any node."""
    tolerations: list[Toleration] = []
    """Taints their pods tolerate, e.g. a dedicated system node pool's."""


# --- ui ------------------------------------------------------------------------------


class UiSpec(_Model):
    """The web view (`trainmaster ui`) as a Deployment in the cluster, read-only."""

    enabled: bool = False
    """Run it in `<namespace>-system` under its own ServiceAccount, which may only get, list
    and watch what the views show (never a Secret), behind a ClusterIP Service."""
    replicas: int = Field(1, ge=1, le=5)
    """Pods of the Deployment (each keeps its own watches; no state is shared)."""
    access_namespaces: list[Name] = Field(default_factory=list, max_length=16)
    """Namespaces whose pods may open the Service (an ingress controller's, a proxy's that
    authenticates users). Empty: no pod may; only `kubectl port-forward` reaches it."""


# --- jobs ----------------------------------------------------------------------------


class CheckpointMirror(_Model):
    """An S3 bucket the job's completed checkpoints are copied to, over the storage network,
    and fetched back from by a gang that starts where its checkpoint volume lacks them."""

    url: str = Field(pattern=r"^s3://[^/\s]+(/\S*)?$", examples=["s3://checkpoints/gpt-small"])
    """`s3://bucket/prefix`: the job's checkpoints go under the prefix (one per job)."""
    endpoint: str = Field(pattern=r"^https?://[^\s/]+(/\S*)?$",
                          examples=["http://datasets.trainmaster.svc.cluster.local:7070"])
    """The S3 server's endpoint URL on the storage network (as `cache.datasets[].endpoint`),
    given to the pod's mirror and fetch containers as `AWS_ENDPOINT_URL`."""
    credentials_secret: Name | None = None
    """A Secret (in the cluster's namespace) whose keys `AWS_ACCESS_KEY_ID`,
    `AWS_SECRET_ACCESS_KEY` and optional `AWS_SESSION_TOKEN` those containers get; omit to
    use the node's or pod's own identity."""
    region: str | None = Field(None, pattern=r"^[a-z0-9-]{1,32}$")
    """`AWS_REGION` of those containers."""


class Checkpoint(_Model):
    """Where and how often a job checkpoints."""

    volume: Name
    """PersistentVolumeClaim that holds checkpoints."""
    path: str = Field(pattern=r"^/")
    """Directory inside the pod."""
    interval_minutes: int = Field(30, ge=1)
    """Minutes between checkpoints."""
    keep: int = Field(3, ge=1, le=1000)
    """Checkpoints kept."""
    mirror: CheckpointMirror | None = None
    """Copy each completed checkpoint to an S3 server over the storage network (a sidecar of
    every gang pod), and fetch the newest from there before the trainer starts when the
    checkpoint volume lacks it, so a gang resumes on nodes that do not share that volume
    (docs/real-nodes.md, "The storage network"). Needs `networks.storage`."""


class RestartPolicy(_Model):
    """How the operator restarts a failed gang."""

    max_restarts: int = Field(3, ge=0, le=10000)
    """Restarts before the job is marked Failed. The schema takes up to 10000; the
    mandatory `job-max-restarts` policy (docs/policies.md) allows at most 100."""
    backoff_seconds: int = Field(30, ge=0, le=86400)
    """Wait before the first restart; doubles each time, capped at 10 minutes."""
    retryable_exit_codes: Literal["any"] | list[Annotated[int, Field(ge=1, le=255)]] = "any"
    """`any` non-zero exit, or only these codes; others fail the job at once."""
    hang_timeout_seconds: int = Field(1800, ge=10)
    """Restart when no heartbeat arrives for this long."""
    container_restart: Literal["gang", "inPlace"] = "gang"
    """What a lost trainer container costs: `gang`, the operator restarts the whole gang in
    new pods; `inPlace` (a rigid torchrun job retrying `any` exit code), the kubelet starts
    the container again in its pod and torchrun's agents rendezvous with it (docs/operator.md)."""


class JobTopology(_Model):
    """A job's own topology constraint, overriding the scheduler's policy."""

    domain: Name
    """`node`, a level name or `cluster`."""
    mode: Mode = "required"
    """`required` (wait for one domain) or `preferred` (spread if it must)."""


class Elastic(_Model):
    """The range of sizes an elastic job runs at (torchrun's `--nnodes=MIN:MAX`)."""

    min_nodes: int = Field(ge=1, le=100000)
    """Fewest nodes the job runs on: it is admitted only when this many fit, and shrinks
    (node loss, preemption) no lower."""
    max_nodes: int = Field(ge=1, le=100000)
    """Most nodes: the gang has this many pods; those that do not fit wait and are bound
    when capacity frees (the job grows)."""


class LaunchArguments(_Model):
    """How hyper-parameters and the resume checkpoint become arguments of the command;
    an unset field takes the launcher's default (docs/spec.md, "Launch arguments")."""

    hyper_parameter: str | None = Field(None, max_length=200)
    """Template of one hyper-parameter argument, split on spaces: `{name}` (kebab-case),
    `{key}` (as written), `{snake}` (snake_case), `{value}`; `""` passes hyper-parameters
    only as `TM_HP_<NAME>` env."""
    resume: list[str] | None = None
    """Arguments added on a restart: `{path}` (the checkpoint), `{root}` (the checkpoint
    root: the directory holding DeepSpeed's `latest` or Megatron's
    `latest_checkpointed_iteration.txt`), `{tag}` (the checkpoint's name), `{step}`. A word
    whose placeholder is empty is dropped with the flag before it; `[]` adds none (the
    program reads `TRAINMASTER_RESUME_FROM`)."""

    @field_validator("hyper_parameter")
    @classmethod
    def _known_hyper_parameter_placeholders(cls, value: str | None) -> str | None:
        _check_placeholders(value or "", {"name", "key", "snake", "value"})
        return value

    @field_validator("resume")
    @classmethod
    def _known_resume_placeholders(cls, value: list[str] | None) -> list[str] | None:
        for word in value or []:
            _check_placeholders(word, {"path", "root", "tag", "step"})
        return value


def _check_placeholders(text: str, known: set[str]) -> None:
    for name in re.findall(r"\{([^{}]*)\}", text):
        if name not in known:
            raise ValueError(f"unknown placeholder {{{name}}}; use one of "
                             + ", ".join(f"{{{k}}}" for k in sorted(known)))


class Job(_Model):
    """A training job: a gang of pods, one per node."""

    name: JobName
    """Job name, unique in the spec; prefixes its pods."""
    image: str = Field(min_length=1)
    """Container image, with a tag or digest."""
    launcher: Literal["torchrun", "deepspeed", "megatron", "python"]
    """How the distributed run is launched: `torchrun`, `deepspeed` or `megatron`; `python`
    runs the command itself, one process per pod (RANK = pod index, WORLD_SIZE = nodes),
    for programs that join the gang on their own."""
    nodes: int = Field(ge=1, le=100000)
    """Pods in the gang, one per node."""
    gpus_per_pod: int = Field(8, ge=1, le=64)
    """GPUs each pod requests (and limits)."""
    cpu_per_pod: int | None = Field(None, ge=1)
    """CPU cores per pod; default: the pod's GPU share of the smallest node with enough
    GPUs, less 10% for system daemons."""
    memory_per_pod: Quantity | None = None
    """Memory per pod; default: the pod's GPU share of the smallest node with enough GPUs,
    less 10% for system daemons, rounded down to whole GiB."""
    command: list[str] = []
    """Command run by the launcher."""
    args: list[str] = []
    """Arguments after the command."""
    hyper_parameters: dict[str, str | int | float | bool] = {}
    """Basic hyper-parameters, passed as `TM_HP_<NAME>` env and as arguments
    (`arguments.hyperParameter`)."""
    arguments: LaunchArguments = LaunchArguments()
    """Templates of the arguments trainmaster adds to the command (hyper-parameters, resume
    checkpoint); the defaults depend on the launcher."""
    env: dict[str, str] = {}
    """Extra environment; NCCL and rendezvous variables are derived."""
    datasets: list[Name] = []
    """Names from `cache.datasets`."""
    checkpoint: Checkpoint | None = None
    """Where checkpoints go; the operator resumes from the latest."""
    restart_policy: RestartPolicy = RestartPolicy()
    """How failures are retried."""
    topology: JobTopology | None = None
    """Overrides `scheduler.topologyPolicy`."""
    elastic: Elastic | None = None
    """Run at any size from `minNodes` to `maxNodes` (docs/scheduler.md, "Elastic jobs");
    `nodes` must lie in the range. Not with launcher `deepspeed`. Unset: exactly `nodes`."""
    queue: Name = "default"
    """Queue from `scheduler.queues`. Unset: `default`, which the spec must then declare;
    without a `default` queue, a job that names none is refused."""
    priority: int | None = Field(None, ge=0, le=1_000_000_000)
    """The job's priority (its pods' PriorityClass); unset: its queue's priority."""
    node_selector: dict[str, str] = {}
    """Node labels the job's pods require (pod `nodeSelector`), e.g. a local cluster's
    real nodes (`trainmaster.io/real-node: "true"`); empty: any GPU node."""
    tolerations: list[Toleration] = []
    """Taints the job's pods tolerate besides the GPU taint, which they always tolerate."""
    suspend: bool = False
    """Keep no gang: the operator deletes the job's Job, pods and PodGroup and keeps its
    checkpoint; back to `false`, a new gang resumes from the newest checkpoint (Kueue's
    `suspend`; `trainmaster jobs suspend|resume`)."""


class Metadata(_Model):
    name: Name
    """Cluster name; prefixes generated object names."""
    namespace: Annotated[
        str, Field(pattern=r"^[a-z0-9]([-a-z0-9]*[a-z0-9])?$", max_length=56)
    ] = "trainmaster"
    """Namespace for the jobs and node agents; the scheduler and operator run in
    `<namespace>-system` (hence at most 56 characters)."""


class ClusterSpec(_Model):
    """A training cluster and its work, as checked into git."""

    api_version: SpecApiVersion
    """Always `trainmaster.io/v1alpha1`."""
    kind: Literal["TrainingCluster"]
    """Always `TrainingCluster`."""
    metadata: Metadata
    """Cluster name and namespace."""
    topology: Topology
    """Switch tree and node hardware."""
    networks: Networks
    """Compute (RDMA) and storage networks."""
    scheduler: SchedulerSpec = SchedulerSpec()
    """trainmaster-scheduler settings, queues and topology policy."""
    cache: CacheSpec | None = None
    """Node-local dataset cache; omit for none."""
    monitoring: MonitoringSpec = MonitoringSpec()
    """GPU metrics, alerts and dashboards."""
    image: ImageSpec = ImageSpec()
    """The trainmaster image the platform's own pods run (not the jobs' images)."""
    system: SystemPlacement = SystemPlacement()
    """Where the scheduler, the operator and the UI run (node selector, tolerations)."""
    ui: UiSpec = UiSpec()
    """The web view in the cluster (off by default; `trainmaster ui` runs it locally)."""
    third_party_crds: Literal["Skip", "IfAbsent", "Never"] = "Skip"
    """What apply and `pulumi up` do where the cluster lacks the Prometheus operator's CRDs
    (ServiceMonitor, PodMonitor, PrometheusRule): `Skip` says so and leaves those objects
    out; `Never` refuses, applying nothing; `IfAbsent` installs inert stand-in CRDs (each
    only where the cluster lacks it, never over one another manager installed) so the
    objects are stored, though nothing reads them. Multus's NetworkAttachmentDefinition
    has no stand-in whatever this says: install Multus first."""
    jobs: list[Job] = []
    """Training jobs."""

    model_config = ConfigDict(ignored_types=(cached_property,))

    @cached_property
    def nodes(self) -> list[ResolvedNode]:
        return resolve_nodes(self.topology)

    @cached_property
    def _smallest_nodes(self) -> dict[int, ResolvedNode]:
        """For each GPU count: the smallest (cpu, memory) node with at least that many."""
        out: dict[int, ResolvedNode] = {}
        for node in sorted(self.nodes, key=lambda n: (n.cpu, n.memory_bytes)):
            for gpus in range(1, node.gpus + 1):
                out.setdefault(gpus, node)
        return out

    def smallest_node(self, gpus: int) -> ResolvedNode:
        """The smallest node that holds a pod of `gpus` GPUs (KeyError if none does)."""
        return self._smallest_nodes[gpus]

    def job(self, name: str) -> Job:
        for job in self.jobs:
            if job.name == name:
                return job
        raise KeyError(name)


@dataclass(frozen=True, slots=True)
class ResolvedNode:
    """A node after the tree is expanded: its hardware and its switch at every level.
    A plain dataclass: there are thousands and their values were validated already."""

    name: str
    gpus: int
    gpu_model: str
    nics: int
    cpu: int
    memory: str
    local_disk: str
    max_pods: int
    switches: tuple[str, ...]
    """Switch names from the top level down to the leaf."""

    @property
    def memory_bytes(self) -> int:
        return parse_bytes(self.memory)

    @property
    def local_disk_bytes(self) -> int:
        return parse_bytes(self.local_disk)


# --- the switch tree expanded into a flat, ordered node list ---------------------------------


def _node(
    name: str,
    base: dict[str, Any],
    switches: tuple[str, ...],
    override: NodeOverride | None = None,
) -> ResolvedNode:
    values = base
    if override is not None:
        values = {**base, **override.model_dump(exclude_none=True, exclude={"name"})}
    return ResolvedNode(name=name, switches=switches, **values)


def generated_switch_name(level: str, index: int) -> str:
    return f"{level}-{index}"


def resolve_nodes(topology: Topology) -> list[ResolvedNode]:
    """Every node, in tree order, with its switch path. Assumes a schema-valid topology."""
    if topology.generate is not None:
        return _resolve_generated(topology)
    nodes: list[ResolvedNode] = []
    base = topology.node.model_dump()
    for switch in topology.switches or []:
        _walk(switch, (), base, nodes)
    return nodes


def _resolve_generated(topology: Topology) -> list[ResolvedNode]:
    gen = topology.generate
    assert gen is not None
    levels = topology.levels
    counts = gen.switches_per_level
    total_leaves = 1
    for c in counts:
        total_leaves *= c
    width = max(3, len(str(total_leaves * gen.nodes_per_leaf - 1)))
    base = topology.node.model_dump()
    nodes: list[ResolvedNode] = []
    # Index switches globally per level so every name is unique: spine-0..4, leaf-0..24.
    paths: list[tuple[str, ...]] = [()]
    for depth, count in enumerate(counts):
        level = levels[depth] if depth < len(levels) else f"level{depth}"
        paths = [
            (*path, generated_switch_name(level, i * count + j))
            for i, path in enumerate(paths)
            for j in range(count)
        ]
    for path in paths:
        for _ in range(gen.nodes_per_leaf):
            nodes.append(_node(f"node-{len(nodes):0{width}d}", base, path))
    return nodes


def _walk(
    switch: Switch, path: tuple[str, ...], base: dict[str, Any], nodes: list[ResolvedNode]
) -> None:
    here = (*path, switch.name)
    for child in switch.switches or []:
        _walk(child, here, base, nodes)
    if isinstance(switch.nodes, int):
        for i in range(switch.nodes):
            nodes.append(_node(f"{switch.name}-node-{i}", base, here))
    elif switch.nodes is not None:
        for override in switch.nodes:
            nodes.append(_node(override.name, base, here, override))


def switch_paths(topology: Topology) -> list[tuple[str, ...]]:
    """Path of every switch (top level first), e.g. ("spine-0",), ("spine-0", "leaf-1")."""
    seen: dict[tuple[str, ...], None] = {}
    for node in resolve_nodes(topology):
        for depth in range(1, len(node.switches) + 1):
            seen.setdefault(node.switches[:depth], None)
    return list(seen)
