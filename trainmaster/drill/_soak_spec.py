"""The spec a soak starts: a copy of the stack's, edited so the soak can run its course.

- the cluster is named `<name>-soak`, so a cluster of the stack itself that runs on this
  host (a `make demo`, another session's drill) is neither reused nor stopped;
- the soaked job (the first that a real node runs with a checkpoint) may restart once per
  fault and then some (`restartPolicy.maxRestarts`), as the soak restarts it on purpose;
- its `trainSteps`, if it has one, outlasts the soak (the numpy job's 5000 steps end in
  about 21 minutes);
- with `elastic`, a torchrun job of N pods becomes elastic N-1..N (`--nnodes=N-1:N`): a
  lost container, node or NIC costs the survivors a re-rendezvous at the smaller size, not
  a restart of the whole gang in new pods, and the gang grows back when the lost member's
  replacement starts.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import yaml

from trainmaster.api import REAL_NODE_LABEL
from trainmaster.cluster import ClusterError
from trainmaster.spec import load_spec

SOAK_TRAIN_STEPS = 10_000_000
SPARE_RESTARTS = 3


def _soaked(doc: dict[str, Any], image: str) -> dict[str, Any]:
    """The job start_real_stack trains: the spec's own real-node job, else its job of the
    trainmaster image (placed on the real nodes in memory), with a checkpoint."""
    jobs = [j for j in doc.get("jobs") or [] if j.get("checkpoint")]
    own = [j for j in jobs if (j.get("nodeSelector") or {}).get(REAL_NODE_LABEL) == "true"]
    found = own or [j for j in jobs if j.get("image") == image]
    if not found:
        raise ClusterError("the spec has no job with a checkpoint to soak: add one (see "
                           "examples/data-parallel)")
    job: dict[str, Any] = found[0]
    return job


def _make_elastic(job: dict[str, Any]) -> None:
    """The soaked job elastic one pod below its size (module docstring), or a clear error
    if it cannot be (validate's rules: docs/operator.md, "Elastic jobs")."""
    name = job.get("name", "?")
    if job.get("launcher") != "torchrun":
        raise ClusterError(f"--elastic: job {name} has launcher {job.get('launcher')!r}; "
                           "the soak makes only a torchrun job elastic: drop --elastic or "
                           "soak stacks/demo (its torch job lm)")
    nodes = int(job.get("nodes", 1))
    if nodes < 2:
        raise ClusterError(f"--elastic: job {name} has nodes {nodes}; an elastic soak needs "
                           "at least 2 (it shrinks by one): drop --elastic")
    if (job.get("restartPolicy") or {}).get("containerRestart") == "inPlace":
        raise ClusterError(f"--elastic: job {name} sets restartPolicy.containerRestart "
                           "inPlace, which an elastic job cannot (its lost member gets a "
                           "new pod): drop --elastic or set containerRestart to gang")
    job.setdefault("elastic", {"minNodes": nodes - 1, "maxNodes": nodes})


def soak_spec(spec: Path, folder: Path, faults: int, elastic: bool = False) -> Path:
    """The edited copy of `spec` in `folder` (module docstring)."""
    try:
        doc = yaml.safe_load(spec.read_text())
    except (OSError, yaml.YAMLError) as exc:
        raise ClusterError(f"{spec}: cannot read the spec: {exc}") from None
    if not isinstance(doc, dict) or not isinstance(doc.get("metadata"), dict):
        raise ClusterError(f"{spec}: not a TrainingCluster spec (no metadata)")
    doc["metadata"]["name"] = f"{doc['metadata'].get('name', 'cluster')}-soak"
    job = _soaked(doc, load_spec(spec).image.reference)
    policy = job.setdefault("restartPolicy", {})
    policy["maxRestarts"] = max(int(policy.get("maxRestarts", 3)), faults + SPARE_RESTARTS)
    params = job.get("hyperParameters") or {}
    if "trainSteps" in params:
        params["trainSteps"] = max(int(params["trainSteps"]), SOAK_TRAIN_STEPS)
    if elastic:
        _make_elastic(job)
    out = folder / spec.name
    out.write_text(yaml.safe_dump(doc, sort_keys=False))
    return out
