"""The environment of a training job's pods: the contract between the rendered pod and the
launcher (the names are trainmaster.api's ``*_ENV``; the launcher reads them), plus the
rendezvous address, torchrun's sizes, NCCL's settings and the job's own hyper-parameters
and variables. Split out of ``_jobs`` (the Job and PodGroup objects) so the contract is
read in one place.
"""

from __future__ import annotations

import re
from typing import Any

from trainmaster.api import (
    CHECKPOINT_DIR_ENV,
    CHECKPOINT_INTERVAL_ENV,
    CHECKPOINT_KEEP_ENV,
    ELASTIC_ENV,
    GANG_UID_ENV,
    GANG_UID_LABEL,
    JOB_ENV,
    METRICS_ADDRESS_ENV,
    METRICS_PORT_ENV,
    NAMESPACE_ENV,
    RDZV_CANDIDATES_ENV,
    RDZV_NODES_ENV,
    RDZV_PORT_ENV,
    RDZV_REELECT_ENV,
    RESTART_ENV,
    RESUME_ARGS_ENV,
    RESUME_FROM_ENV,
    RESUME_TEMPLATE_ENV,
)
from trainmaster.launch import METRICS_PORT
from trainmaster.objects._launch_args import resume_args_env, resume_template_env
from trainmaster.objects._networks import nccl_env
from trainmaster.spec import ClusterSpec, Job

MASTER_PORT = 29500
ELASTIC_RDZV_PORT = 29400


def gang_name(job: str, attempt: int) -> str:
    """The name of attempt `attempt` of the job named `job`: its Job, PodGroup and pods."""
    return f"{job}-r{attempt}"


def torchrun_nnodes(job: Job) -> str:
    """torchrun's --nnodes: MIN:MAX for an elastic job, else the fixed size."""
    return f"{job.elastic.min_nodes}:{job.elastic.max_nodes}" if job.elastic else str(job.nodes)


def _env_name(name: str) -> str:
    return re.sub(r"(?<!^)(?=[A-Z])", "_", name).upper()


def _elastic_env(job: Job, gang: str, pod_dns: str) -> dict[str, str]:
    """How an elastic gang's pods find each other. torchrun (and megatron, which runs under
    torchrun): torchrun's own elastic agent, whose
    c10d store the launcher elects among the pods (trainmaster.launch._store). python:
    trainmaster's launchers rendezvous among themselves and set RANK and WORLD_SIZE per
    round (trainmaster.launch._elastic). Other launchers cannot be elastic (validate)."""
    if job.elastic is None:
        return {}
    if job.launcher in ("torchrun", "megatron"):  # megatron runs under torchrun
        return {RDZV_CANDIDATES_ENV: f"{gang}-{{index}}.{pod_dns}:{ELASTIC_RDZV_PORT}",
                RDZV_NODES_ENV: str(job.elastic.max_nodes),
                RDZV_REELECT_ENV: str(job.restart_policy.max_restarts)}
    return {ELASTIC_ENV: f"{job.elastic.min_nodes}:{job.elastic.max_nodes}",
            RDZV_PORT_ENV: str(ELASTIC_RDZV_PORT)}


def container_env(
    spec: ClusterSpec, job: Job, attempt: int, resume_from: str | None
) -> list[dict[str, Any]]:
    gang = gang_name(job.name, attempt)
    pod_dns = f"{job.name}.{spec.metadata.namespace}.svc"
    # torchrun and deepspeed start a process per GPU; the python launcher one per pod.
    procs_per_pod = 1 if job.launcher == "python" else job.gpus_per_pod
    env: dict[str, str] = {
        **nccl_env(spec),
        "MASTER_ADDR": f"{gang}-0.{pod_dns}",
        "MASTER_PORT": str(MASTER_PORT),
        # torchrun's --nnodes: MIN:MAX for an elastic job (WORLD_SIZE is then torchrun's).
        "NNODES": torchrun_nnodes(job),
        "NPROC_PER_NODE": str(procs_per_pod),
        "WORLD_SIZE": str(job.nodes * procs_per_pod),
        JOB_ENV: job.name,
        NAMESPACE_ENV: spec.metadata.namespace,
        RESTART_ENV: str(attempt),
        RESUME_FROM_ENV: resume_from or "",
        RESUME_ARGS_ENV: resume_args_env(job, resume_from),
        # For the launcher to resume from a newer complete checkpoint it finds at start-up.
        RESUME_TEMPLATE_ENV: resume_template_env(job),
        # Every rank serves its progress to the PodMonitor on the `metrics` port (the
        # job's NetworkPolicy admits only the scraper to it).
        METRICS_PORT_ENV: str(METRICS_PORT),
        METRICS_ADDRESS_ENV: "0.0.0.0",
        **_elastic_env(job, gang, pod_dns),
    }
    if job.checkpoint is not None:
        env[CHECKPOINT_DIR_ENV] = job.checkpoint.path
        env[CHECKPOINT_INTERVAL_ENV] = str(job.checkpoint.interval_minutes)
        env[CHECKPOINT_KEEP_ENV] = str(job.checkpoint.keep)
    for key, value in job.hyper_parameters.items():
        env[f"TM_HP_{_env_name(key)}"] = str(value)
    env.update(job.env)
    out: list[dict[str, Any]] = [{"name": k, "value": v} for k, v in env.items()]
    out.append({"name": "POD_NAME", "valueFrom": {"fieldRef": {"fieldPath": "metadata.name"}}})
    # The attempt's Job uid (its controller sets the label): the ranks of one gang agree
    # on the checkpoint to resume from under this name (trainmaster.launch._resume).
    out.append({"name": GANG_UID_ENV, "valueFrom": {"fieldRef": {
        "fieldPath": f"metadata.labels['{GANG_UID_LABEL}']"}}})
    return out


