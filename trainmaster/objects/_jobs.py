"""Training jobs: the TrainingJob resource, and the gang the operator runs for it.

A gang is one attempt of a job: an Indexed Job (one pod per node, completions =
parallelism = nodes), a PodGroup for all-or-nothing scheduling, and the launch script.
The headless Service for rendezvous, the job's identity (ServiceAccount, Role,
RoleBinding) and its NetworkPolicy outlive attempts. Attempt ``n`` is named
``<job>-r<n>`` so a new gang never collides with the terminating pods of the last one.
"""

from __future__ import annotations

import re
import shlex
from functools import lru_cache
from pathlib import Path
from typing import Any

import jinja2

from trainmaster.api import (
    API_VERSION,
    ATTEMPT_LABEL,
    DATASETS_ANNOTATION,
    GPU_RESOURCE,
    GROUP,
    JOB_LABEL,
    MAX_MEMBERS_ANNOTATION,
    POD_GROUP_LABEL,
    PODGROUP_API_VERSION,
    QUEUE_LABEL,
    TOPOLOGY_DOMAIN_ANNOTATION,
    TOPOLOGY_MODE_ANNOTATION,
    app_labels,
    format_bytes,
    parse_bytes,
)
from trainmaster.launch import BUNDLE_NAME, METRICS_PORT
from trainmaster.objects._gang_init import LAUNCHER_DIR, gang_init_containers
from trainmaster.objects._job_env import (
    ELASTIC_RDZV_PORT,
    MASTER_PORT,
    container_env,
    gang_name,
    torchrun_nnodes,
)
from trainmaster.objects._launch_args import (
    hyper_parameter_args,
)
from trainmaster.objects._netpol import allow_within_job
from trainmaster.objects._networks import (
    NETWORKS_ANNOTATION,
    pod_network_annotation,
    rdma_resources,
)
from trainmaster.objects._security import SECCOMP_RUNTIME_DEFAULT, confined_container
from trainmaster.spec import ClusterSpec, Job, job_gang

"""torchrun's c10d store port; also where an elastic `python` gang's launchers
rendezvous (trainmaster.launch._elastic)."""
_TEMPLATES = Path(__file__).resolve().parent.parent / "data" / "templates"


def priority_class_name(spec: ClusterSpec, queue: str, priority: int | None = None) -> str:
    """The queue's PriorityClass, or with ``priority`` the class of jobs of that queue
    that set their own priority (``<cluster>-<queue>-p<priority>``)."""
    base = f"{spec.metadata.name}-{queue}"
    return base if priority is None else f"{base}-p{priority}"


def job_priority_class(spec: ClusterSpec, job: Job) -> str:
    return priority_class_name(spec, job.queue, job.priority)


def build_training_job(spec: ClusterSpec, job: Job) -> dict[str, Any]:
    """The TrainingJob resource the operator reconciles: the spec's job, verbatim."""
    return {
        "apiVersion": API_VERSION,
        "kind": "TrainingJob",
        "metadata": {
            "name": job.name,
            "namespace": spec.metadata.namespace,
            "labels": {
                **app_labels(job.name, "training-job", spec.metadata.name),
                JOB_LABEL: job.name,
            },
        },
        "spec": _job_spec(job),
    }


def _job_spec(job: Job) -> dict[str, Any]:
    spec: dict[str, Any] = job.model_dump(by_alias=True, exclude_none=True, mode="json")
    for placement in ("nodeSelector", "tolerations"):  # unset placement renders as before
        if not spec.get(placement):
            spec.pop(placement, None)
    if not spec.get("suspend"):
        # Left out when false: a re-apply of the spec must not resume a job that
        # `trainmaster jobs suspend` suspended (another field manager owns it then).
        spec.pop("suspend", None)
    return spec


def build_training_jobs(spec: ClusterSpec) -> list[dict[str, Any]]:
    """One TrainingJob per spec job. Their identities come with their gangs (build_gang),
    so a TrainingJob created by hand gets one too."""
    return [build_training_job(spec, job) for job in spec.jobs]


def _pod_share(spec: ClusterSpec, job: Job) -> tuple[int, int]:
    """(cpu cores, memory bytes) per pod: the request, else the pod's GPU share of the
    smallest suitable node less 10% for system daemons."""
    node = spec.smallest_node(job.gpus_per_pod)
    share = job.gpus_per_pod / node.gpus
    cpu = job.cpu_per_pod or max(1, int(node.cpu * share * 0.9))
    memory = (
        parse_bytes(job.memory_per_pod)
        if job.memory_per_pod
        else int(node.memory_bytes * share * 0.9) // 2**30 * 2**30
    )
    return cpu, memory


def _entry(job: Job) -> str:
    """The script and its arguments as the launcher takes them (quoted for bash)."""
    command = list(job.command)
    flags = hyper_parameter_args(job)
    if job.launcher == "python":  # the command runs as it is, once per pod
        return " ".join(shlex.quote(part) for part in (*command, *job.args, *flags))
    if command and command[0] in ("torchrun", "deepspeed"):
        command = command[1:]
    if command and re.fullmatch(r"python[0-9.]*", command[0]):
        command = command[1:]
    elif command and job.launcher != "deepspeed" and not command[0].endswith(".py"):
        command = ["--no-python", *command]
    return " ".join(shlex.quote(part) for part in (*command, *job.args, *flags))


@lru_cache(maxsize=1)
def _template_env() -> jinja2.Environment:
    return jinja2.Environment(
        loader=jinja2.FileSystemLoader(_TEMPLATES),
        undefined=jinja2.StrictUndefined,
        keep_trailing_newline=True,
        autoescape=False,
    )


ELASTIC_LAST_CALL_SECONDS = 3
"""How long an elastic torchrun gang's rendezvous waits for more members once it has its
minimum (torchrun's default, 30 s, is most of a shrink's time). The survivors of a lost
node fail in the same all-reduce, so they join within a second or two of each other."""
ELASTIC_KEEP_ALIVE_SECONDS = 1
ELASTIC_KEEP_ALIVE_MISSES = 8
"""A lost node's agent stays a participant of the finished round until it has missed this
many keep-alives (torchrun's default 5 s x 3); while it does, the survivors cannot start the
next round (c10d moves on only when the round's participants are gone). 1 s x 8: the dead
node is dropped about 8 s after its last heartbeat, for one small store write a second per
agent. Not shorter: an agent starved of CPU that misses them all is declared dead while it
trains, and a joining node then starts a world of its own (two worlds of one, seen with 3 s
at load average 20 on two real nodes, 2026-12-05)."""


def elastic_rdzv_conf() -> str:
    """The `--rdzv-conf` settings (after is_host) of an elastic torchrun gang."""
    return (f",last_call_timeout={ELASTIC_LAST_CALL_SECONDS}"
            f",keep_alive_interval={ELASTIC_KEEP_ALIVE_SECONDS}"
            f",keep_alive_max_attempt={ELASTIC_KEEP_ALIVE_MISSES}")


RDZV_KEEP_ALIVE = (f",keep_alive_interval={ELASTIC_KEEP_ALIVE_SECONDS}"
                   f",keep_alive_max_attempt={ELASTIC_KEEP_ALIVE_MISSES}")
"""A container restarted in place rejoins its gang's rendezvous, whose next round opens
once the dead agent is dropped from the last: after keep_alive_max_attempt missed
heartbeats (torch's default, 5 s x 3, was most of a restart's wait). The elastic gang's
1 s x 8, for the same reason as there: fewer misses split a CPU-starved gang in two."""


def render_launch_script(job: Job) -> str:
    conf = (elastic_rdzv_conf() if job.elastic
            else RDZV_KEEP_ALIVE if restarts_container_in_place(job) else "")
    return _template_env().get_template("launch.sh.j2").render(
        job=job, entry=_entry(job), bundle=f"{LAUNCHER_DIR}/{BUNDLE_NAME}",
        nnodes=torchrun_nnodes(job), rdzv_port=ELASTIC_RDZV_PORT, rdzv_conf=conf)


def _owner(owner: dict[str, Any] | None) -> list[dict[str, Any]]:
    if owner is None:
        return []
    return [
        {
            "apiVersion": owner["apiVersion"],
            "kind": owner["kind"],
            "name": owner["metadata"]["name"],
            "uid": owner["metadata"]["uid"],
            "controller": True,
            "blockOwnerDeletion": True,
        }
    ]


def _meta(
    spec: ClusterSpec,
    job: Job,
    name: str,
    component: str,
    owner: dict[str, Any] | None,
    extra: dict[str, str] | None = None,
) -> dict[str, Any]:
    meta: dict[str, Any] = {
        "name": name,
        "namespace": spec.metadata.namespace,
        "labels": {
            **app_labels(job.name, component, spec.metadata.name),
            JOB_LABEL: job.name,
            **(extra or {}),
        },
    }
    refs = _owner(owner)
    if refs:
        meta["ownerReferences"] = refs
    return meta


def build_service(
    spec: ClusterSpec, job: Job, owner: dict[str, Any] | None = None
) -> dict[str, Any]:
    """Headless Service: stable DNS for rank 0 (rendezvous) across attempts."""
    return {
        "apiVersion": "v1",
        "kind": "Service",
        "metadata": _meta(spec, job, job.name, "rendezvous", owner),
        "spec": {
            "clusterIP": "None",
            "publishNotReadyAddresses": True,
            "selector": {JOB_LABEL: job.name},
            "ports": [{"name": "rendezvous", "port": MASTER_PORT}],
        },
    }


def trainer_account(job: Job) -> str:
    """The ServiceAccount, Role and RoleBinding name of a job's pods."""
    return f"{job.name}-trainer"


def build_job_identity(
    spec: ClusterSpec, job: Job, owner: dict[str, Any] | None = None
) -> list[dict[str, Any]]:
    """The identity of one job's pods: they may read and patch the status of their own
    TrainingJob (heartbeats and checkpoints, the `trainmaster launch` contract) and
    nothing else. `resourceNames` pins the Role to this job, so a pod of another job, or
    any other pod of the namespace, cannot steer this job's restart.

    The operator creates these with the gang. It needs neither `bind` nor `escalate` for
    that: RBAC lets a subject create a Role and bind it when the subject holds every
    right the Role grants, and the operator holds get/patch on all TrainingJob statuses
    of its namespace."""
    name = trainer_account(job)
    return [
        {
            "apiVersion": "v1",
            "kind": "ServiceAccount",
            "metadata": _meta(spec, job, name, "trainer", owner),
        },
        {
            "apiVersion": "rbac.authorization.k8s.io/v1",
            "kind": "Role",
            "metadata": _meta(spec, job, name, "trainer", owner),
            "rules": [
                {
                    "apiGroups": [GROUP],
                    "resources": ["trainingjobs/status"],
                    "resourceNames": [job.name],
                    "verbs": ["get", "patch"],
                }
            ],
        },
        {
            "apiVersion": "rbac.authorization.k8s.io/v1",
            "kind": "RoleBinding",
            "metadata": _meta(spec, job, name, "trainer", owner),
            "roleRef": {"apiGroup": "rbac.authorization.k8s.io", "kind": "Role", "name": name},
            "subjects": [
                {"kind": "ServiceAccount", "name": name, "namespace": spec.metadata.namespace}
            ],
        },
    ]


def build_job_network_policy(
    spec: ClusterSpec, job: Job, owner: dict[str, Any] | None = None
) -> dict[str, Any]:
    """The job's pods accept traffic from each other (rendezvous) and metrics scrapes."""
    return allow_within_job(
        spec, _meta(spec, job, f"{job.name}-rendezvous", "rendezvous", owner), {JOB_LABEL: job.name}
    )


def build_launch_config(
    spec: ClusterSpec, job: Job, owner: dict[str, Any] | None = None
) -> dict[str, Any]:
    return {
        "apiVersion": "v1",
        "kind": "ConfigMap",
        "metadata": _meta(spec, job, f"{job.name}-launch", "launch-script", owner),
        "data": {"launch.sh": render_launch_script(job)},
    }


def build_pod_group(
    spec: ClusterSpec, job: Job, attempt: int, owner: dict[str, Any] | None = None
) -> dict[str, Any]:
    shape = job_gang(spec, job)
    gang = gang_name(job.name, attempt)
    meta = _meta(spec, job, gang, "gang", owner,
                 {ATTEMPT_LABEL: str(attempt), QUEUE_LABEL: shape.queue})
    # An elastic job without its own constraint names no topology: the scheduler applies
    # its policy (the spec's topologyPolicy) to the size it actually places.
    meta["annotations"] = {} if shape.sized else {
        TOPOLOGY_DOMAIN_ANNOTATION: shape.domain,
        TOPOLOGY_MODE_ANNOTATION: shape.mode,
    }
    if shape.max_pods is not None:
        meta["annotations"][MAX_MEMBERS_ANNOTATION] = str(shape.max_pods)
    return {
        "apiVersion": PODGROUP_API_VERSION,
        "kind": "PodGroup",
        "metadata": meta,
        "spec": {
            "minMember": shape.pods,
            "minResources": {GPU_RESOURCE: str(shape.gpus)},
            "scheduleTimeoutSeconds": spec.scheduler.gang_timeout_seconds,
        },
    }


def restarts_container_in_place(job: Job) -> bool:
    """restartPolicy.containerRestart inPlace (a rigid torchrun job retrying any exit code:
    validate refuses it elsewhere): a lost container is restarted in its pod by the kubelet
    (pod restartPolicy OnFailure), and the other pods' torchrun agents rendezvous with it
    again, without a new gang (no new pods to schedule, attach and start, and the others
    keep their workers' warm forkserver). The Job counts those restarts against
    restartPolicy.maxRestarts (its backoffLimit); past them it fails and the operator
    restarts the gang."""
    return (job.restart_policy.container_restart == "inPlace" and job.launcher == "torchrun"
            and job.elastic is None and job.restart_policy.retryable_exit_codes == "any")


def _failure_limits(job: Job) -> dict[str, Any]:
    """A rigid gang's Job fails at its first failed pod (the operator restarts the gang);
    for a job whose containers restart in place, once their restarts pass maxRestarts.
    An elastic gang goes on without a lost member: the Job replaces that member's pod
    (pending until the scheduler finds it a node, then the gang grows), up to
    restartPolicy.maxRestarts times per member; an index failing more fails the Job."""
    if restarts_container_in_place(job):
        return {"backoffLimit": job.restart_policy.max_restarts}
    if job.elastic is None:
        return {"backoffLimit": 0}
    return {"backoffLimitPerIndex": job.restart_policy.max_restarts, "maxFailedIndexes": 0,
            # The replacement waits until the lost pod is gone: never two of one rank.
            "podReplacementPolicy": "Failed"}


def build_gang_job(
    spec: ClusterSpec,
    job: Job,
    attempt: int,
    resume_from: str | None = None,
    owner: dict[str, Any] | None = None,
) -> dict[str, Any]:
    """The Indexed Job of one attempt: one pod per node, gang-scheduled, never retried by
    the Job controller itself (the operator restarts whole gangs)."""
    gang = gang_name(job.name, attempt)
    cpu, memory = _pod_share(spec, job)
    resources = {
        GPU_RESOURCE: str(job.gpus_per_pod),
        "cpu": str(cpu),
        "memory": format_bytes(memory),
    }
    for rdma in rdma_resources(spec):
        resources[rdma] = "1"
    pod_labels = {
        **app_labels(job.name, "worker", spec.metadata.name),
        JOB_LABEL: job.name,
        ATTEMPT_LABEL: str(attempt),
        POD_GROUP_LABEL: gang,
        QUEUE_LABEL: job.queue,
    }
    mounts: list[dict[str, Any]] = [
        {"name": "launch", "mountPath": "/etc/trainmaster", "readOnly": True},
        {"name": "launcher", "mountPath": LAUNCHER_DIR, "readOnly": True},
        {"name": "dshm", "mountPath": "/dev/shm"},
    ]
    volumes: list[dict[str, Any]] = [
        {"name": "launch", "configMap": {"name": f"{job.name}-launch", "defaultMode": 0o755}},
        {"name": "launcher", "emptyDir": {"sizeLimit": "64Mi"}},
        {"name": "dshm", "emptyDir": {"medium": "Memory"}},
    ]
    if job.checkpoint is not None:
        mounts.append({"name": "checkpoints", "mountPath": job.checkpoint.path})
        volumes.append(
            {"name": "checkpoints", "persistentVolumeClaim": {"claimName": job.checkpoint.volume}}
        )
    if job.datasets and spec.cache is not None:
        mounts.append({"name": "dataset-cache", "mountPath": "/data", "readOnly": True})
        volumes.append(
            {
                "name": "dataset-cache",
                "hostPath": {"path": spec.cache.path, "type": "DirectoryOrCreate"},
            }
        )
    metadata = _meta(spec, job, gang, "gang", owner, {ATTEMPT_LABEL: str(attempt)})
    return {
        "apiVersion": "batch/v1",
        "kind": "Job",
        "metadata": metadata,
        "spec": {
            "completionMode": "Indexed",
            # An elastic job's gang has maxNodes pods; the scheduler binds those that fit.
            "completions": job_gang(spec, job).members,
            "parallelism": job_gang(spec, job).members,
            **_failure_limits(job),
            "template": {
                "metadata": {
                    "labels": pod_labels,
                    "annotations": {
                        NETWORKS_ANNOTATION: pod_network_annotation(spec),
                        **({DATASETS_ANNOTATION: ",".join(job.datasets)}
                           if job.datasets else {}),
                    },
                },
                "spec": {
                    "serviceAccountName": trainer_account(job),
                    "securityContext": {"seccompProfile": dict(SECCOMP_RUNTIME_DEFAULT)},
                    "schedulerName": spec.scheduler.name,
                    "priorityClassName": job_priority_class(spec, job),
                    "restartPolicy": "OnFailure" if restarts_container_in_place(job)
                    else "Never",
                    "subdomain": job.name,
                    "terminationGracePeriodSeconds": 30,
                    "initContainers": gang_init_containers(spec, job),
                    "containers": [
                        {
                            "name": "trainer",
                            "image": job.image,
                            "command": ["/bin/bash", "/etc/trainmaster/launch.sh"],
                            "ports": [{"name": "metrics", "containerPort": METRICS_PORT}],
                            "env": container_env(spec, job, attempt, resume_from),
                            "resources": {"requests": resources, "limits": dict(resources)},
                            # IPC_LOCK: RDMA pins (locks) the memory it registers.
                            "securityContext": confined_container(add=["IPC_LOCK"]),
                            "volumeMounts": mounts,
                        }
                    ],
                    "volumes": volumes,
                    "tolerations": [
                        {"key": GPU_RESOURCE, "operator": "Exists", "effect": "NoSchedule"},
                        *(t.model_dump(by_alias=True, exclude_none=True)
                          for t in job.tolerations),
                    ],
                    **({"nodeSelector": dict(job.node_selector)} if job.node_selector else {}),
                },
            },
        },
    }


def build_gang(
    spec: ClusterSpec,
    job: Job,
    attempt: int,
    resume_from: str | None = None,
    owner: dict[str, Any] | None = None,
) -> list[dict[str, Any]]:
    """Everything one attempt of a job needs, in apply order (the identity first: the
    Job's pods cannot be created before their ServiceAccount exists)."""
    return [
        *build_job_identity(spec, job, owner),
        build_job_network_policy(spec, job, owner),
        build_service(spec, job, owner),
        build_launch_config(spec, job, owner),
        build_pod_group(spec, job, attempt, owner),
        build_gang_job(spec, job, attempt, resume_from, owner),
    ]
