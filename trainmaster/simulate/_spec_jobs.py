"""``simulate --spec FILE`` without ``--trace``/``--synthetic``: the spec's own ``jobs`` as
the workload.

A spec says what each job is (pods, GPUs, queue, priority, topology, elastic range) but
not when it is submitted nor how long it runs, so those come from options:

* ``--job-seconds S`` (default 3600): every job's work; ``--job-seconds NAME=S``
  (repeatable) sets one job's;
* ``--submit-every S`` (default 0): the jobs are submitted in the spec's order, job ``i``
  (from 0) at ``i x S`` seconds.

A job is a gang of ``nodes`` pods (``elastic.maxNodes`` when elastic, with
``elastic.minNodes`` as its fewest) of ``gpusPerPod`` GPUs, as the operator renders it.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from pathlib import Path

from trainmaster.scheduler import TopologyConstraint, TopologyMode

from ._jobs import Job, WorkloadError

DEFAULT_JOB_SECONDS = 3600.0


def _seconds(text: str, what: str) -> float:
    try:
        value = float(text)
    except ValueError:
        value = math.nan
    if not math.isfinite(value) or value <= 0:
        raise ValueError(f"{what} must be a number of seconds > 0, got {text!r}")
    return value


def job_seconds(values: Sequence[str], names: Sequence[str]) -> tuple[float, dict[str, float]]:
    """``--job-seconds`` values -> (every job's work, per-job overrides). Raises
    ValueError (a usage error) naming the bad value or the unknown job."""
    default = DEFAULT_JOB_SECONDS
    own: dict[str, float] = {}
    for value in values:
        name, sep, raw = value.partition("=")
        if not sep:
            default = _seconds(value, "--job-seconds")
            continue
        name = name.strip()
        if name not in names:
            raise ValueError(f"--job-seconds: {name!r} is not a job of the spec: use one of "
                             f"{', '.join(names)}")
        own[name] = _seconds(raw.strip(), f"--job-seconds {name}")
    return default, own


def spec_jobs(path: Path, seconds: Sequence[str] = (), submit_every: float = 0.0) -> list[Job]:
    """The spec's jobs as a workload (see the module doc)."""
    from trainmaster.spec import load_spec

    spec = load_spec(path)
    if not spec.jobs:
        raise WorkloadError(f"{path}: the spec has no jobs: add some under `jobs:`, or give "
                            "--trace FILE.csv or --synthetic")
    if not math.isfinite(submit_every) or submit_every < 0:
        raise ValueError(f"--submit-every must be >= 0 seconds, got {submit_every}")
    default, own = job_seconds(seconds, [j.name for j in spec.jobs])
    out = []
    for i, job in enumerate(spec.jobs):
        pods, fewest = job.nodes, None
        if job.elastic is not None:
            pods = job.elastic.max_nodes
            fewest = job.elastic.min_nodes if job.elastic.min_nodes < pods else None
        topology = (TopologyConstraint(job.topology.domain, TopologyMode(job.topology.mode))
                    if job.topology is not None else None)
        out.append(Job(job.name, round(i * submit_every, 3), own.get(job.name, default), pods,
                       job.gpus_per_pod, job.queue, job.priority, topology, 0, fewest))
    return out
