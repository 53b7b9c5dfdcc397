"""Which job of a stack a drill runs on the real nodes, and the edits a drill makes to its
restart policy before the stack starts.

A stack may place a job on the real nodes itself (stacks/demo: the PyTorch job `lm` in the
torch image); then that job's image is the one loaded into the nodes and the job drilled.
Otherwise the drill places the trainmaster image's jobs there (the numpy example).

The restart-policy edits make a recovery measurable: `backoffSeconds` 0 (a backoff is a
deliberate wait before the restart, not recovery time, as in the kwok benchmark) and a
`hangTimeoutSeconds` short enough for the `process-hang` drill to wait out.
"""

from __future__ import annotations

import copy
from pathlib import Path
from typing import Any

from trainmaster.api import REAL_NODE_LABEL
from trainmaster.cluster import ClusterError
from trainmaster.spec import load_spec


def spec_real_images(spec_path: Path) -> set[str] | None:
    """The images of the jobs the spec itself places on the real nodes (stacks/demo: the
    torch image of lm); None when it places none (the drill's default then applies: the
    trainmaster image's jobs are placed there in memory)."""
    spec = load_spec(spec_path)
    found = {j.image for j in spec.jobs if j.node_selector.get(REAL_NODE_LABEL) == "true"}
    return found or None


def with_restart_policy(doc: dict[str, Any], job: str, backoff_seconds: int | None = None,
                        hang_timeout_seconds: int | None = None) -> dict[str, Any]:
    """The spec document with job `job`'s restartPolicy fields set (None: as it was)."""
    out = copy.deepcopy(doc)
    found = [j for j in out.get("jobs") or [] if j.get("name") == job]
    if not found:
        raise ClusterError(f"the stack has no job {job!r} to drill")
    policy = found[0].setdefault("restartPolicy", {})
    if backoff_seconds is not None:
        policy["backoffSeconds"] = backoff_seconds
    if hang_timeout_seconds is not None:
        policy["hangTimeoutSeconds"] = hang_timeout_seconds
    return out


def drilled_job(spec_path: Path) -> str:
    """The job a drill on this stack runs on the real nodes: as `start_real_stack` chooses
    it, the first placed there with a checkpoint."""
    import yaml

    from trainmaster.drill._stack import placed_on_real_nodes

    spec = load_spec(spec_path)
    images = spec_real_images(spec_path) or {spec.image.reference}
    _, moved = placed_on_real_nodes(yaml.safe_load(spec_path.read_text()), images)
    for job in spec.jobs:
        if job.name in moved and job.checkpoint is not None:
            return job.name
    raise ClusterError(f"{spec_path}: no job runs {', '.join(sorted(images))} with a "
                       "checkpoint, so nothing can train on the real nodes")
