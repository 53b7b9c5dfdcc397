"""The JobSet controller's pod labels, read by ``convert.pod_info`` and ``jobsets.py``: a
JobSet's pod is a member of the gang ``jobset:<name>``, its part being its Job."""

from __future__ import annotations

from collections.abc import Mapping

JOBSET_API_VERSION = "jobset.x-k8s.io/v1alpha2"
JOBSET_KIND = "JobSet"
JOBSET_NAME_LABEL = "jobset.sigs.k8s.io/jobset-name"
REPLICATED_JOB_LABEL = "jobset.sigs.k8s.io/replicatedjob-name"
JOB_INDEX_LABEL = "jobset.sigs.k8s.io/job-index"
JOBSET_GANG_PREFIX = "jobset:"
"""Keeps a JobSet's gang apart from a PodGroup of the same name."""


def jobset_gang(labels: Mapping[str, str]) -> str | None:
    """The gang name of a JobSet's pod (``jobset:<name>``), None for any other pod."""
    name = labels.get(JOBSET_NAME_LABEL)
    return f"{JOBSET_GANG_PREFIX}{name}" if name else None


def jobset_part(labels: Mapping[str, str]) -> str:
    """The pod's Job within its JobSet: ``<replicatedjob>/<index>`` ('' for other pods)."""
    if JOBSET_NAME_LABEL not in labels:
        return ""
    return f"{labels.get(REPLICATED_JOB_LABEL, '')}/{labels.get(JOB_INDEX_LABEL, '')}"
