"""The upstream gang API as a source of gangs: ``scheduling.k8s.io/v1beta1`` PodGroups
(Kubernetes 1.37, ``GenericWorkload`` gate) and the pods that name one in
``spec.schedulingGroup.podGroupName``.

Rules (docs/interop.md has them for users):

* A PodGroup becomes a gang like a scheduler-plugins PodGroup: ``schedulingPolicy.gang``
  ``minCount`` is its ``minMember``; ``schedulingPolicy.basic`` (pods scheduled
  independently) an elastic gang of minimum 1, which places as many as fit.
* ``schedulingConstraints.topology[0].key`` is a node label: ``topology.trainmaster.io/<level>``
  of one of the scheduler's levels, or ``kubernetes.io/hostname``, is that level,
  *required* (the API says all pods are colocated in one domain). Another key makes the
  gang wait, saying which keys work. Without a constraint, the ``trainmaster.io/topology-*``
  annotations apply, else the config's policy by size, as for any PodGroup.
* The PodGroup's template already carries the Workload's policy and constraints (the API
  copies them when the group is made), so a plain PodGroup's Workload is not read; a
  child of a composite group (``spec.parentCompositePodGroupName``) joins its parent's
  gang, whose policy is the Workload's composite template (``composites.py``).
* The gang name is the object's name behind ``UPSTREAM_PREFIX``: a scheduler-plugins
  PodGroup of the same name stays another gang.
* Status: ``PodGroupInitiallyScheduled`` False/Unschedulable with the scheduler's message
  while the gang waits, True once it is placed, and never written again after True (the
  API makes True terminal). Written by server-side apply on the ``status`` subresource.
  A composite group's v1alpha3 CompositePodGroup, when one exists, gets
  ``CompositePodGroupInitiallyScheduled`` the same way.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Sequence
from typing import Any

from trainmaster.kubeclient import ApiError, Kube, Reflector, api_path

from .._keys import (
    COMPOSITE_API_VERSION,
    COMPOSITE_PODGROUP_INITIALLY_SCHEDULED,
    HOSTNAME_LABEL,
    PODGROUP_INITIALLY_SCHEDULED,
    WORKLOAD_API_VERSION,
    topology_label,
)
from ..framework.model import NODE_LEVEL, TopologyConstraint, TopologyMode
from .convert import JSON, UPSTREAM_PREFIX, PodGroupInfo, pod_group_info
from .events import ApiWriter, now_rfc3339

PLURAL = "podgroups"
COMPOSITE_PLURAL = "compositepodgroups"
BASIC_MINIMUM = 1
"""A ``basic`` group's pods are scheduled independently: any one may start."""


def podgroup_path(namespace: str | None = None, name: str | None = None,
                  sub: str | None = None) -> str:
    return api_path(WORKLOAD_API_VERSION, PLURAL, namespace, name, sub)


def composite_object_path(namespace: str | None = None, name: str | None = None,
                          sub: str | None = None) -> str:
    """The v1alpha3 CompositePodGroups (``composites.py`` reads them)."""
    return api_path(COMPOSITE_API_VERSION, COMPOSITE_PLURAL, namespace, name, sub)


def is_upstream(key: str) -> bool:
    """Whether gang ``key`` (``namespace/name``) is an upstream PodGroup's."""
    return key.split("/", 1)[-1].startswith(UPSTREAM_PREFIX)


def missing_message(key: str) -> str:
    namespace, _, gang = key.partition("/")
    name = gang.removeprefix(UPSTREAM_PREFIX)
    return (f"waiting for PodGroup {namespace}/{name} ({WORKLOAD_API_VERSION}; its pods "
            "name it in spec.schedulingGroup.podGroupName)")


def topology_constraint(constraints: Any, levels: Sequence[str]
                        ) -> tuple[TopologyConstraint | None, str | None]:
    """(the constraint, None) or (None, why the key cannot be honoured)."""
    topology = (constraints or {}).get("topology") or []
    if not topology:
        return None, None
    key = str((topology[0] or {}).get("key") or "")
    by_label = {topology_label(level): level for level in levels}
    by_label[HOSTNAME_LABEL] = NODE_LEVEL
    level = by_label.get(key)
    if level is None:
        known = ", ".join(sorted(by_label))
        return None, (f"schedulingConstraints.topology key {key!r} is not a topology level "
                      f"of this scheduler: use one of {known}")
    return TopologyConstraint(level, TopologyMode.REQUIRED), None


def upstream_group_info(obj: JSON, levels: Sequence[str]) -> PodGroupInfo:
    """An upstream PodGroup as the runtime uses it (its gang name is ``name``)."""
    meta = obj.get("metadata") or {}
    spec = obj.get("spec") or {}
    policy = spec.get("schedulingPolicy") or {}
    base = pod_group_info(obj)  # namespace, uid, labels and trainmaster.io annotations
    topology, invalid = topology_constraint(spec.get("schedulingConstraints"), levels)
    gang = policy.get("gang")
    min_member = max(0, int((gang or {}).get("minCount") or 0))
    elastic = gang is None and policy.get("basic") is not None
    conditions = (obj.get("status") or {}).get("conditions") or []
    workload_ref = spec.get("workloadRef") or {}
    return dataclasses.replace(
        base,
        name=f"{UPSTREAM_PREFIX}{meta['name']}",
        object_name=meta["name"],
        api_version=WORKLOAD_API_VERSION,
        min_member=BASIC_MINIMUM if elastic else min_member,
        max_members=None if not elastic else base.max_members or BASIC_MINIMUM,
        topology=topology or base.topology,
        invalid=invalid,
        initially_scheduled=any(c.get("type") == PODGROUP_INITIALLY_SCHEDULED
                                and c.get("status") == "True" for c in conditions),
        parent_composite=str(spec.get("parentCompositePodGroupName") or ""),
        workload=(str(workload_ref.get("workloadName") or ""),
                  str(workload_ref.get("templateName") or "")),
    )


def upstream_reflector(api: Kube, handler: Any) -> Reflector:
    """Watches every namespace's upstream PodGroups; a cluster that does not serve the API
    (the gate off) has none, and the scheduler runs on without them."""
    return Reflector(api, podgroup_path(), handler, name="podgroups.scheduling.k8s.io",
                     optional=True)


class GroupStatus:
    """Writes ``PodGroupInitiallyScheduled`` on upstream PodGroups, off the bind path."""

    def __init__(self, api: Kube, writer: ApiWriter, field_manager: str) -> None:
        self._api = api
        self._writer = writer
        self._field_manager = field_manager
        self._scheduled: set[str] = set()
        """uids already reported True this run (their cache entry may lag our write)."""

    def unschedulable(self, group: PodGroupInfo | None, message: str, since: str,
                      reason: str = "Unschedulable") -> None:
        if group is None or group.api_version != WORKLOAD_API_VERSION:
            return
        if group.initially_scheduled or group.uid in self._scheduled:
            return  # True is terminal
        for name in group.children or (group.ref_name,):  # a composite: every child
            self._apply(group, name, "False", reason, message, since)
        if group.composite_object:
            self._apply(group, group.composite_object, "False", reason, message, since,
                        composite=True)

    def scheduled(self, group: PodGroupInfo | None, message: str) -> None:
        if group is None or group.api_version != WORKLOAD_API_VERSION:
            return
        if group.initially_scheduled or group.uid in self._scheduled:
            return
        self._scheduled.add(group.uid)
        for name in group.children or (group.ref_name,):
            self._apply(group, name, "True", "Scheduled", message, now_rfc3339())
        if group.composite_object:
            self._apply(group, group.composite_object, "True", "Scheduled", message,
                        now_rfc3339(), composite=True)

    def _apply(self, group: PodGroupInfo, name: str, status: str, reason: str, message: str,
               since: str, *, composite: bool = False) -> None:
        """Applies the condition on PodGroup ``name``, or on CompositePodGroup ``name``."""
        body = {
            "apiVersion": COMPOSITE_API_VERSION if composite else WORKLOAD_API_VERSION,
            "kind": "CompositePodGroup" if composite else "PodGroup",
            "metadata": {"name": name, "namespace": group.namespace},
            "status": {"conditions": [{
                "type": COMPOSITE_PODGROUP_INITIALLY_SCHEDULED if composite
                else PODGROUP_INITIALLY_SCHEDULED,
                "status": status,
                "reason": reason,
                "message": message[:32768],
                "lastTransitionTime": since,
            }]},
        }
        path = (composite_object_path if composite else podgroup_path)(
            group.namespace, name, "status")
        params = {"fieldManager": self._field_manager, "force": "true"}

        async def write() -> None:
            if status == "False" and group.uid in self._scheduled:
                return  # placed since this report was queued: a late False would lie
            try:
                await self._api.request("PATCH", path, params=params, body=body,
                                        content_type="application/apply-patch+yaml")
            except ApiError as err:
                if err.status != 404:  # the group is gone: nothing to report on
                    raise

        self._writer.submit(write)
