"""What will run for each job of a spec: its TrainingJob and its first gang (ServiceAccount,
Role, RoleBinding, NetworkPolicy, Service, launch-script ConfigMap, PodGroup and the
Indexed Job), built by the same ``build_gang`` call the operator makes and `policy check`
judges, as YAML a person can read (`trainmaster render --jobs`)."""

from __future__ import annotations

from typing import Any

import yaml

from trainmaster.objects._job_env import gang_name
from trainmaster.objects._jobs import (
    build_gang,
    build_training_job,
    job_priority_class,
)
from trainmaster.spec import ClusterSpec, Job, job_gang

FIRST_ATTEMPT = 0
"""The gang a new TrainingJob gets (`<job>-r0`); a restart's differs only in its name,
its attempt label and TRAINMASTER_RESUME_FROM."""


def job_objects(spec: ClusterSpec, job: Job) -> list[dict[str, Any]]:
    """The job's TrainingJob, then its first gang in the order the operator applies it."""
    return [build_training_job(spec, job), *build_gang(spec, job, FIRST_ATTEMPT)]


def gang_summary(spec: ClusterSpec, job: Job) -> list[str]:
    """A few lines on what the scheduler will be asked to place, for a YAML comment."""
    shape = job_gang(spec, job)
    size = (f"{shape.pods}..{shape.max_pods} pods (elastic)" if shape.max_pods is not None
            else f"{shape.pods} pods")
    where = ("the size placed, by scheduler.topologyPolicy" if shape.sized
             else f"{shape.mode} {shape.domain}")
    priority = (f"priority {shape.priority}" if shape.priority is not None
                else "the queue's priority")
    lines = [
        f"job {job.name}: gang {gang_name(job.name, FIRST_ATTEMPT)}, {size} x "
        f"{shape.gpus_per_pod} GPUs, launcher {job.launcher}",
        f"queue {shape.queue}, {priority} (PriorityClass "
        f"{job_priority_class(spec, job)}), topology {where}",
        f"a restart makes gang {job.name}-r<N> with TRAINMASTER_RESUME_FROM set to the newest "
        "checkpoint" if job.checkpoint is not None else
        f"a restart makes gang {job.name}-r<N> (no checkpoint: it starts over)",
    ]
    if job.suspend:
        lines.append("suspend: true: the operator creates no gang until it is resumed")
    return lines


class _Literal(yaml.SafeDumper):
    """Multi-line strings (the launch script) as `|` blocks, as a person wrote them."""


def _str(dumper: yaml.SafeDumper, value: str) -> yaml.Node:
    style = "|" if "\n" in value else None
    return dumper.represent_scalar("tag:yaml.org,2002:str", value, style=style)


_Literal.add_representer(str, _str)


def jobs_yaml(spec: ClusterSpec, jobs: list[Job]) -> str:
    """Each job's objects as one YAML stream, each job's preceded by its summary."""
    parts = []
    for job in jobs:
        header = "".join(f"# {line}\n" for line in gang_summary(spec, job))
        body = yaml.dump_all(job_objects(spec, job), Dumper=_Literal, sort_keys=False,
                             width=100)
        parts.append(f"---\n{header}{body}")
    return "".join(parts)
