"""JobSets as gangs: a JobSet's pods are one gang, its Jobs the gang's parts.

The JobSet controller labels every pod it makes with ``jobset.sigs.k8s.io/jobset-name``,
``replicatedjob-name`` and ``job-index``. A pod with those labels and no scheduler-plugins
PodGroup label (which wins: it is the explicit choice) belongs to the gang
``<namespace>/jobset:<name>``, its part being its Job (``<replicatedjob>/<index>``). The
JobSet object itself (an informer, like the PodGroups') gives what the pods cannot:

* the gang's size: every pod of every Job (replicas x parallelism, capped by
  completions), so the JobSet starts only when all of it fits;
* ``alpha.jobset.sigs.k8s.io/exclusive-topology``, a node label key: each Job is placed
  whole in one domain of the level whose label that is, no two Jobs in one domain
  (``placement/parts.py``). A key that names no level of the scheduler is refused, with
  the levels it could name;
* its queue label (``kueue.x-k8s.io/queue-name``) and the ``trainmaster.io/topology-*``
  annotations, as on a PodGroup.

The ``jobset:`` prefix keeps these gangs apart from PodGroups of the same name.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Iterable, Mapping
from typing import Any

from trainmaster.kubeclient import Kube, Reflector, api_path

from .._keys import HOSTNAME_LABEL, topology_label
from ..framework.model import NODE_LEVEL
from .convert import PodGroupInfo, pod_group_info
from .jobset_labels import JOBSET_API_VERSION, JOBSET_GANG_PREFIX

JOBSET_PLURAL = "jobsets"
EXCLUSIVE_TOPOLOGY = "alpha.jobset.sigs.k8s.io/exclusive-topology"


def _pods_of(replicated: Mapping[str, Any]) -> int:
    job = ((replicated.get("template") or {}).get("spec")) or {}
    raw = job.get("parallelism")
    parallelism = 1 if raw is None else int(raw)
    completions = job.get("completions")
    per_job = parallelism if completions is None else min(parallelism, int(completions))
    return int(replicated.get("replicas", 1)) * per_job


def _exclusive_key(obj: Mapping[str, Any]) -> str | None:
    """The JobSet's exclusive-topology key, else the first replicated Job's that sets one
    (JobSet lets either carry it)."""
    meta = obj.get("metadata") or {}
    key = (meta.get("annotations") or {}).get(EXCLUSIVE_TOPOLOGY)
    if key:
        return str(key)
    for replicated in (obj.get("spec") or {}).get("replicatedJobs") or ():
        template_meta = (replicated.get("template") or {}).get("metadata") or {}
        key = (template_meta.get("annotations") or {}).get(EXCLUSIVE_TOPOLOGY)
        if key:
            return str(key)
    return None


def level_of_label(key: str, levels: Iterable[str]) -> str | None:
    """The topology level whose node label is ``key`` (``node`` for the hostname)."""
    if key == HOSTNAME_LABEL:
        return NODE_LEVEL
    return next((level for level in levels if topology_label(level) == key), None)


def jobset_group_info(obj: Mapping[str, Any], levels: tuple[str, ...]) -> PodGroupInfo:
    """The gang a JobSet's pods form, as the runtime handles a PodGroup's."""
    meta = obj.get("metadata") or {}
    base = pod_group_info({"metadata": meta, "spec": {}})
    replicated = (obj.get("spec") or {}).get("replicatedJobs") or ()
    size = sum(_pods_of(r) for r in replicated)
    key = _exclusive_key(obj)
    part_level = ""
    problem = None
    if key:
        level = level_of_label(key, levels)
        if level is None:
            names = ", ".join([HOSTNAME_LABEL, *(topology_label(lv) for lv in levels)])
            problem = (f"JobSet {base.namespace}/{base.name}: {EXCLUSIVE_TOPOLOGY} is {key}, "
                       f"which is no topology level of this scheduler: use one of {names}")
        else:
            part_level = level
    return dataclasses.replace(base, name=f"{JOBSET_GANG_PREFIX}{base.name}", min_member=size,
                               part_level=part_level, problem=problem)


def jobset_reflector(api: Kube, handler: Any) -> Reflector:
    """JobSets of every namespace; optional: without JobSet's CRD nothing is watched."""
    return Reflector(api, api_path(JOBSET_API_VERSION, JOBSET_PLURAL, None), handler,
                     name=JOBSET_PLURAL, optional=True)
