"""Label, annotation and taint keys: each spelled once.

trainmaster's own keys live under ``trainmaster.io/`` (and ``<what>.trainmaster.io/`` for
families of keys, like one topology label per switch level); the other projects' keys
trainmaster writes or reads (scheduler-plugins, Kueue, Kubernetes itself) are here too,
so a reader finds the whole contract in one file. There is no finalizer: owner
references and the garbage collector remove a job's objects, and the operator registers
no deletion handler (which would make its framework add one).
"""

from __future__ import annotations

from typing import Final

# --- nodes ---------------------------------------------------------------------------

TOPOLOGY_PREFIX: Final = "topology.trainmaster.io/"
"""Node label per switch level: topology.trainmaster.io/<level> = <switch name>."""
GPU_MODEL_LABEL: Final = "trainmaster.io/gpu-model"
"""Node label: the GPU model (spec `topology.node.gpuModel`)."""
REAL_NODE_LABEL: Final = "trainmaster.io/real-node"
"""Node label "true" on a local cluster's real (kubelet) nodes, as opposed to kwok's."""
UNHEALTHY_TAINT: Final = "trainmaster.io/unhealthy"
"""NoSchedule taint the operator puts on a node it fenced; its value names the problem."""
FENCED_ANNOTATION: Final = "trainmaster.io/fenced"
"""Node annotation, JSON {reason, time, cordoned}: why and when the operator fenced it."""
DATASET_LABEL_PREFIX: Final = "dataset.trainmaster.io/"
"""Node label per dataset the node's cache is warmed for: dataset.trainmaster.io/<dataset> =
one of CACHE_STATES; the node annotation of the same key holds the details (JSON: state,
reason, time, pod, bootID, verify)."""
CACHE_WARMING: Final = "warming"
"""A warm-up of the dataset is placed on (or bound for) the node."""
CACHE_READY: Final = "ready"
"""The node's cache holds the dataset complete: what DatasetLocality and the hold count."""
CACHE_FAILED: Final = "failed"
"""The last warm-up failed or could not be placed; the annotation says why."""
CACHE_EVICTED: Final = "evicted"
"""A later warm-up of another dataset evicted it (least recently used) to make room."""
CACHE_STATES: Final = (CACHE_WARMING, CACHE_READY, CACHE_FAILED, CACHE_EVICTED)
SIMULATE_LABEL: Final = "trainmaster.io/simulate"
"""On a pod: `complete` makes kwok finish it (trainmaster/data/kwok): how a warm-up
"runs" on a simulated node, which has no disk to fill."""
WARM_NODE_LABEL: Final = "trainmaster.io/warm-node"
"""On a per-node warm-up Job and its pod: the node whose cache it fills (if the node name
fits a label value; the node affinity is what pins it)."""
HOSTNAME_LABEL: Final = "kubernetes.io/hostname"
KWOK_NODE_ANNOTATION: Final = "kwok.x-k8s.io/node"
"""On a kwok node: kwok simulates it."""
NIC_NETDEVS_ANNOTATION: Final = "trainmaster.io/nic-netdevs"
"""Node annotation, comma-separated interface names: on a node without RDMA devices, the
network interfaces the NIC agent judges instead (operstate, carrier). `cluster up` sets it
on each real node to its interfaces on the stand-in fabric's rails."""

# --- resources -----------------------------------------------------------------------

GPU_RESOURCE: Final = "nvidia.com/gpu"
RDMA_PREFIX: Final = "rdma/"
"""Extended resource per RDMA rail: rdma/<rail>."""

# --- jobs, gangs and their pods ------------------------------------------------------

JOB_LABEL: Final = "trainmaster.io/job"
"""On every object of a TrainingJob: the job's name."""
ATTEMPT_LABEL: Final = "trainmaster.io/attempt"
"""On a gang's objects: the attempt (status.attempt) that created them."""
POD_GROUP_LABEL: Final = "scheduling.x-k8s.io/pod-group"
"""On a gang's pods: their PodGroup (scheduler-plugins' coscheduling label)."""
QUEUE_LABEL: Final = "kueue.x-k8s.io/queue-name"
"""The queue of a gang's PodGroup and pods (Kueue's LocalQueue label)."""
ADMISSION_PROBE_LABEL: Final = "trainmaster.io/admission-probe"
"""On the dry-run pod `trainmaster apply` sends to learn that the guardrail admission
policies are in force: an administrator's dry run carrying it is judged like a team's."""
QUEUE_LEDGER_COMPONENT: Final = "queue-ledger"
"""app.kubernetes.io/component of the ConfigMap where trainmaster-scheduler publishes the
GPUs it has admitted per queue (its ledger), under the data key QUEUE_LEDGER_KEY."""
QUEUE_LEDGER_KEY: Final = "usage.yaml"
MAX_MEMBERS_ANNOTATION: Final = "trainmaster.io/max-members"
"""On an elastic gang's PodGroup: its members (maxNodes); `minMember` is its minimum. The
scheduler admits it at the largest size in [minMember, max-members] that fits."""
TOPOLOGY_DOMAIN_ANNOTATION: Final = "trainmaster.io/topology-domain"
"""On a PodGroup: the topology level the gang must (or should) fit in."""
TOPOLOGY_MODE_ANNOTATION: Final = "trainmaster.io/topology-mode"
"""On a PodGroup: `required` or `preferred`."""
CHECKPOINT_ANNOTATION: Final = "trainmaster.io/last-checkpoint-time"
"""On a gang's PodGroup: when the job last wrote a checkpoint (RFC 3339); preemption's
work lost."""
RESTART_ANNOTATION: Final = "trainmaster.io/restart-seconds"
"""On a gang's PodGroup: how long the job takes to come back after an eviction (pull,
start, load its checkpoint), in seconds; preemption prices it as every GPU idle that long
on top of the work since the last checkpoint. Absent: 0."""
DATASETS_ANNOTATION: Final = "trainmaster.io/datasets"
"""On a gang's pods: the datasets they read, comma separated (dataset locality)."""
DATASET_LABEL: Final = "trainmaster.io/dataset"
"""On a dataset cache's objects: the dataset's name."""
GANG_UID_LABEL: Final = "batch.kubernetes.io/controller-uid"
"""The Job controller's label on its pods: the gang's (Job's) uid."""
COMPLETION_INDEX_ANNOTATION: Final = "batch.kubernetes.io/job-completion-index"
"""An indexed Job's pod's rank."""
PREEMPTION_ANNOTATION: Final = "trainmaster.io/preemption"
"""On a ``Preempted`` Event: the preemption's figures as JSON (``PreemptionRecord``)."""
PREEMPT_LOWER: Final = "PreemptLowerPriority"
"""A PriorityClass's preemptionPolicy that lets its pods preempt."""

# --- bookkeeping ---------------------------------------------------------------------

STUB_ANNOTATION: Final = "trainmaster.io/stub-crd"
"""On the third-party CRDs trainmaster installs: a stand-in, not the project's own CRD."""
KOPF_ANNOTATION_PREFIX: Final = "trainmaster.io"
"""The operator framework keeps its progress in annotations trainmaster.io/<handler> and
trainmaster.io/last-handled-configuration."""
BENCH_LABEL: Final = "trainmaster.io/bench"
"""On the objects `trainmaster bench` creates: the run that created them."""
RECOVERY_BASELINE_LABEL: Final = "trainmaster.io/recovery-baseline"
"""On the baseline Job of the recovery benchmark."""

APP_NAME_LABEL: Final = "app.kubernetes.io/name"
APP_COMPONENT_LABEL: Final = "app.kubernetes.io/component"
APP_INSTANCE_LABEL: Final = "app.kubernetes.io/instance"
APP_PART_OF_LABEL: Final = "app.kubernetes.io/part-of"
APP_MANAGED_BY_LABEL: Final = "app.kubernetes.io/managed-by"


def topology_label(level: str) -> str:
    """The node label of one switch level."""
    return f"{TOPOLOGY_PREFIX}{level}"


def dataset_label(dataset: str) -> str:
    """The node label (and annotation) with the node's cache state of `dataset`."""
    return f"{DATASET_LABEL_PREFIX}{dataset}"


def queue_ledger_name(scheduler_name: str) -> str:
    """The ConfigMap (in the scheduler's own namespace) holding its queue ledger."""
    return f"{scheduler_name}-queue-usage"


def app_labels(name: str, component: str, instance: str) -> dict[str, str]:
    """The recommended app.kubernetes.io labels for an object trainmaster manages."""
    return {
        APP_NAME_LABEL: name,
        APP_COMPONENT_LABEL: component,
        APP_INSTANCE_LABEL: instance,
        APP_PART_OF_LABEL: "trainmaster",
        APP_MANAGED_BY_LABEL: "trainmaster",
    }
