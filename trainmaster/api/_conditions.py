"""TrainingJob phases, condition types and reasons, and the reasons of the Events
trainmaster posts. Written by the operator, read by `trainmaster status`, tests and people
(`kubectl get tj`, `kubectl describe`)."""

from __future__ import annotations

from typing import Final

# --- status.phase --------------------------------------------------------------------

PENDING: Final = "Pending"
RUNNING: Final = "Running"
RESTARTING: Final = "Restarting"
SUCCEEDED: Final = "Succeeded"
FAILED: Final = "Failed"
SUSPENDED: Final = "Suspended"
"""spec.suspend: no gang exists; the checkpoint is kept for the resume."""
TERMINAL: Final = frozenset({SUCCEEDED, FAILED})

# --- status.conditions[].type --------------------------------------------------------

COND_RUNNING: Final = "Running"
COND_FAILED: Final = "Failed"
COND_SUCCEEDED: Final = "Succeeded"
COND_SPEC_VALID: Final = "SpecValid"
COND_DATASETS_READY: Final = "DatasetsReady"
COND_SUSPENDED: Final = "Suspended"

# --- status.conditions[].reason ------------------------------------------------------

REASON_VALID: Final = "Valid"
"""SpecValid=True."""
REASON_WARM: Final = "Warm"
"""DatasetsReady=True."""
REASON_WAITING_FOR_WARMUP: Final = "WaitingForWarmup"
"""DatasetsReady=False."""
WARMUP_FAILED: Final = "WarmupFailed"
"""DatasetsReady=False: a warm-up pod of a dataset the job waits for failed (also an Event
reason, carrying the pod's message)."""
WARMUP_TIMEOUT: Final = "WarmupTimeout"
"""Failed: the datasets were not warm within cache.warmupTimeoutMinutes."""
REASON_GANG_CREATED: Final = "GangCreated"
REASON_GANG_RUNNING: Final = "GangRunning"
REASON_GANG_PENDING: Final = "GangPending"
REASON_COMPLETED: Final = "Completed"
REASON_SUSPENDED: Final = "JobSuspended"
"""Suspended=True: spec.suspend is set and the gang was removed."""
REASON_RESUMED: Final = "JobResumed"
"""Suspended=False after a resume (also the Running=False reason until the new gang runs)."""
NON_RETRYABLE: Final = "NonRetryableExitCode"
"""Failed: a pod exited with a code restartPolicy.retryableExitCodes does not list."""
MAX_RESTARTS: Final = "MaxRestartsExceeded"
"""Failed: restartPolicy.maxRestarts used up."""
INVALID_SPEC: Final = "InvalidSpec"
"""Failed and SpecValid=False: the spec does not validate (also an Event reason)."""
# Running=False after a restart carries the restart's cause (operator `Cause`) as reason.

# --- Event reasons -------------------------------------------------------------------

EVENT_RESTARTING: Final = "Restarting"
EVENT_SPEC_CHANGED: Final = "SpecChanged"
EVENT_PREEMPTED: Final = "Preempted"
EVENT_PREEMPTING: Final = "Preempting"
"""On a preemptor's PodGroup: the domain it frees and the work its victims lose."""
EVENT_RESUMED_NEWER: Final = "ResumedNewer"
EVENT_SUCCEEDED: Final = "Succeeded"
EVENT_SUSPENDED: Final = "Suspended"
EVENT_RESUMED: Final = "Resumed"
EVENT_FAILED: Final = "Failed"
EVENT_WAITING_FOR_DATASETS: Final = "WaitingForDatasets"
EVENT_INVALID_SPEC: Final = INVALID_SPEC
EVENT_FENCED: Final = "Fenced"
"""On a Node the operator cordoned and tainted."""
EVENT_TOPOLOGY_UNKNOWN: Final = "TopologyUnknown"
"""On a GPU Node whose place in the switch tree is unknown."""
EVENT_ELASTIC_SHRINK: Final = "ElasticShrink"
"""On an elastic TrainingJob the operator shrank after losing members."""
EVENT_ELASTIC_GROW: Final = "ElasticGrow"
"""On an elastic TrainingJob the operator grew when capacity came back."""
EVENT_FAILED_SCHEDULING: Final = "FailedScheduling"
"""On a pending gang's PodGroup (a lone pod: on the pod): why trainmaster-scheduler
cannot place it now, the same message as its pods' PodScheduled=False condition."""
EVENT_SCHEDULED: Final = "Scheduled"
"""On a placed gang's PodGroup (a lone pod: on the pod): where it went."""

# --- conditions of other kinds trainmaster reads or writes ---------------------------

DISRUPTION_TARGET: Final = "DisruptionTarget"
"""Pod condition set on a preemption victim before it is evicted."""
PREEMPTION_BY_SCHEDULER: Final = "PreemptionByScheduler"
"""DisruptionTarget's reason when trainmaster-scheduler (like kube-scheduler) preempts."""
POD_SCHEDULED: Final = "PodScheduled"
UNSCHEDULABLE: Final = "Unschedulable"
"""PodScheduled=False reason (kube-scheduler's) for a gang that does not fit now."""
NAMESPACE_NOT_SERVED: Final = "NamespaceNotServed"
"""Pod PodScheduled=False reason and Warning Event reason: the pod names
trainmaster-scheduler in a namespace it does not serve (``scheduler.namespaces``)."""
PODGROUP_INITIALLY_SCHEDULED: Final = "PodGroupInitiallyScheduled"
"""An upstream (scheduling.k8s.io) PodGroup's condition: True once the whole gang was
placed (terminal: never False again), False with reason Unschedulable until then."""
COMPOSITE_PODGROUP_INITIALLY_SCHEDULED: Final = "CompositePodGroupInitiallyScheduled"
"""A v1alpha3 CompositePodGroup's condition, as PodGroupInitiallyScheduled for the whole
subtree of PodGroups under it (terminal once True)."""
NODE_READY: Final = "Ready"
NIC_CONDITION: Final = "NICHealthy"
"""Node condition the NIC agent sets; the operator fences on NICHealthy=False."""
GPU_CONDITION: Final = "GPUHealthy"
"""Node condition a GPU health agent sets; the operator fences on GPUHealthy=False."""
LOCAL_QUEUE_NOT_FOUND: Final = "LocalQueueNotFound"
"""Pod PodScheduled=False reason and Warning Event reason: the pod's namespace resolves its
queue label through LocalQueues, and it has none of that name."""
CLUSTER_QUEUE_NOT_FOUND: Final = "ClusterQueueDoesNotExist"
"""Pod PodScheduled=False reason and Warning Event reason: the LocalQueue the pod names
points at a queue the scheduler's config does not have (Kueue's reason for an inactive
LocalQueue)."""
CRD_ESTABLISHED: Final = "Established"
JOB_COMPLETE: Final = "Complete"
JOB_FAILED: Final = "Failed"
