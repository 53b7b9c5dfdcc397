"""Informer events to scheduler state: the snapshot, our pending pods, the PodGroups.

Every pod bound to a node is charged to it (whoever scheduled it: capacity is capacity);
finished or deleted pods are released. Only pods with our ``schedulerName``, unbound and
not being deleted, are *pending*; they are indexed by gang so the loop re-assembles only
the gangs that changed (``dirty``). A change that can make a waiting gang fit (a node
added or changed, a pod gone) sets ``capacity_changed``; both wake the loop.

A pod the snapshot already tracks (assumed by us, bind in flight) is never pending
again, which is what keeps a pod from being placed twice while its bind echo is on the
way. Bound pods being deleted stay charged (they still run) but no longer count as
placed members of their gang.
"""

from __future__ import annotations

import asyncio
import dataclasses
import logging
import re
import time
from collections import Counter
from collections.abc import Iterable

from trainmaster.kubeclient import DELETED

from .._keys import CLUSTER_QUEUE_NOT_FOUND, LOCAL_QUEUE_NOT_FOUND
from ..framework.model import NodeInfo, PodRequest
from ..plugins.quota import QueueLedger
from ..state import ClusterState, PodState
from .composite_sources import CompositeSources
from .composites import COMPOSITE_PREFIX, composite_group_info, composite_key, in_composite
from .config import SchedulerConfig
from .convert import (
    JSON,
    UPSTREAM_PREFIX,
    PodGroupInfo,
    PodInfo,
    node_info,
    pod_group_info,
    pod_info,
)
from .gangs import gang_key_of
from .jobsets import jobset_group_info
from .local_queues import LocalQueues
from .report import NOT_SERVED, not_served_message
from .upstream_groups import upstream_group_info

log = logging.getLogger("trainmaster.scheduler")

_FINISHED = ("Succeeded", "Failed")
UNFINISHED_PODS = ",".join(f"status.phase!={phase}" for phase in _FINISHED)
"""Field selector of the pods the cache follows: finished pods hold nothing."""
_UID = re.compile(rb'"uid":"([^"]+)"')
_RESOURCE_VERSION = re.compile(rb'"resourceVersion":"([^"]+)"')
# Above 1 in this many nodes changed at once, one rebuild is cheaper than single changes.
_REBUILD_FRACTION = 4


class ClusterCache:
    def __init__(self, config: SchedulerConfig) -> None:
        self.config = config
        self.levels = config.levels
        self._snapshot: ClusterState | None = None
        self.nodes: dict[str, NodeInfo] = {}
        self.pending: dict[str, PodInfo] = {}
        """uid -> our unbound pods (including ones whose bind is in flight)."""
        self.members: dict[str, set[str]] = {}
        """gang key -> uids of its pending pods."""
        self.groups: dict[str, PodGroupInfo] = {}
        self.terminating: set[str] = set()
        self.dirty: set[str] = set()
        self.capacity_changed = False
        self.releases = 0  # pods gone, binds forgotten: the loop waits while they come
        self.last_release = float("-inf")
        """time.monotonic() of the last release: a step due for another reason (a retry's
        timer) also waits while a stream of releases is still coming."""
        self.changed = asyncio.Event()
        self._orphans: dict[str, tuple[PodRequest, str]] = {}
        """Pods bound to nodes the snapshot does not know yet."""
        self._early: list[tuple[str, JSON]] = []
        self._node_updates: dict[str, NodeInfo] = {}
        self.ledger = QueueLedger(config.queues, config.default_queue, config.cohorts,
                                  config.fair_sharing)
        """Resources in use per queue: bound pods and pods assumed by a cycle."""
        self.local_queues = LocalQueues(config.local_queue_namespaces)
        """LocalQueue -> queue, per team namespace (``local_queues.py``)."""
        self.started: dict[str, float] = {}
        """uid -> when a bound pod started (its work since then may be lost)."""
        self.ours: dict[str, int] = {}
        """Placed pods with our schedulerName (uid -> priority): the only ones preemption
        may evict."""
        self._our_priorities: Counter[int] = Counter()
        self.composites = CompositeSources()
        """Composite groups' policies: CompositePodGroups, else Workloads' templates."""
        self._parent_of: dict[str, str] = {}
        """Child PodGroup gang key -> its composite gang key (``composites.py``)."""

    # --- snapshot ---------------------------------------------------------------------

    @property
    def snapshot(self) -> ClusterState:
        if self._snapshot is None:
            raise RuntimeError("the node list has not been loaded yet")
        return self._snapshot

    @property
    def ready(self) -> bool:
        return self._snapshot is not None

    def build_snapshot(self) -> ClusterState:
        """Build the snapshot once from the listed nodes (one O(nodes) build instead of one
        rebuild per node), then replay pod events that arrived before it."""
        self._snapshot = ClusterState(self.nodes.values(), levels=self.levels)
        early, self._early = self._early, []
        for kind, obj in early:
            self.on_pod(kind, obj)
        return self._snapshot

    def _wake(self) -> None:
        self.changed.set()

    def _capacity(self) -> None:
        self.capacity_changed = True
        self.releases += 1
        self.last_release = time.monotonic()
        self.changed.set()

    def touch(self, key: str) -> None:
        self.dirty.add(key)
        self.changed.set()

    def take_dirty(self) -> set[str]:
        dirty, self.dirty = self.dirty, set()
        return dirty

    def take_capacity_changed(self) -> bool:
        changed, self.capacity_changed = self.capacity_changed, False
        return changed

    # --- nodes ------------------------------------------------------------------------

    def _selected(self, obj: JSON) -> bool:
        wanted = self.config.node_selector
        if not wanted:
            return True
        labels = obj["metadata"].get("labels") or {}
        return all(labels.get(k) == v for k, v in wanted.items())

    def on_node(self, kind: str, obj: JSON) -> None:
        name = obj["metadata"]["name"]
        if kind == DELETED or not self._selected(obj):
            if name not in self.nodes:
                return  # never seen: deleted before we saw it, or not ours (node_selector)
            kind = DELETED  # deleted, or it left our partition: as if deleted
            old = self.nodes.get(name)
            # The core has no node removal: a deleted node stays as an empty, cordoned one
            # until its pods are gone (the pod GC deletes them).
            info = NodeInfo(name, {}, unschedulable=True, topology=old.topology if old else ())
        else:
            info = node_info(obj, self.levels)
        if self.nodes.get(name) == info:
            return  # status heartbeats and the like: nothing the scheduler looks at
        self.nodes[name] = info
        if self._snapshot is None:
            return
        log.debug("node %s %s: unschedulable=%s taints=%s", name, kind.lower(),
                  info.unschedulable, [t.key for t in info.taints])
        self._node_updates[name] = info
        self._capacity()

    def apply_node_updates(self) -> int:
        """Apply node changes gathered since the last call.

        Each is one ``set_node``, O(that node). Why still batched: a fresh cluster changes
        every node a few times in its first seconds (taints lifted, labels added), and a
        node changed twice in one step is applied once. When most nodes changed at once,
        one rebuild (O(nodes + pods)) is cheaper than that many single changes.
        """
        updates, self._node_updates = self._node_updates, {}
        if not updates:
            return 0
        snap = self.snapshot
        if len(updates) * _REBUILD_FRACTION <= len(snap.columns.nodes):
            for info in updates.values():
                snap.set_node(info)
        else:
            specs = {n.name: n for n in snap.nodes}
            specs.update(updates)
            snap.replace_nodes(specs.values())
        for uid, (pod, node) in list(self._orphans.items()):
            if node in updates:
                del self._orphans[uid]
                snap.add_bound(pod, node)
        return len(updates)

    # --- pods -------------------------------------------------------------------------

    def skip_pod_event(self, line: bytes) -> str | None:
        """The resource version of a raw pod watch event that cannot matter, else None.

        Why: a bound pod's later updates (kubelet status, conditions: two or three per
        pod right after it is bound) cannot change what the scheduler knows, except for
        deletion or finishing. Decoding them was the runtime's largest CPU cost while
        binding. An event is skipped only if it is MODIFIED, its ``metadata.uid`` (the
        object's first "uid": the API server writes metadata first, uid before labels)
        is a pod the snapshot has *bound*, and neither "deletionTimestamp" nor a
        finished phase appears anywhere in it; anything unexpected means a full decode.
        """
        if not line.startswith(b'{"type":"MODIFIED"'):
            return None
        found = _UID.search(line)
        snap = self._snapshot
        if found is None or snap is None:
            return None
        if snap.pod_state(found.group(1).decode()) is not PodState.BOUND:
            return None
        if b'"deletionTimestamp"' in line or b'"phase":"Succeeded"' in line \
                or b'"phase":"Failed"' in line:
            return None
        version = _RESOURCE_VERSION.search(line, found.end())
        return None if version is None else version.group(1).decode()

    def on_pod(self, kind: str, obj: JSON) -> None:
        if self._snapshot is None:
            self._early.append((kind, obj))
            return
        meta = obj["metadata"]
        uid = meta["uid"]
        if kind == DELETED:
            self._release(uid)
            return
        spec = obj.get("spec") or {}
        node = spec.get("nodeName") or ""
        phase = (obj.get("status") or {}).get("phase")
        if phase in _FINISHED:
            self._release(uid)
            return
        snap = self._snapshot
        if node:
            self._drop_pending(uid)
            if meta.get("deletionTimestamp") and uid not in self.terminating:
                self.terminating.add(uid)
            if snap.pod_state(uid) is PodState.BOUND and snap.pod_node(uid) == node:
                return  # the common update of a running pod (status, labels)
            bound = self._rekeyed(pod_info(obj))
            request = bound.request
            self.note_started(uid, bound.started)
            if bound.scheduler_name == self.config.scheduler_name:
                self.own(uid, bound.request.priority)
            self.ledger.charge(uid, self.queue_of(request, bound.queue), request.requests)
            if self.config.node_selector and node not in self.nodes:
                return  # a node outside our partition
            try:
                snap.add_bound(request, node)
            except KeyError:  # a node the snapshot does not have (yet)
                self._orphans[uid] = (request, node)
            return
        if spec.get("schedulerName", "default-scheduler") != self.config.scheduler_name:
            return
        if meta.get("deletionTimestamp"):
            self._drop_pending(uid)
            return
        info = self._rekeyed(pod_info(obj))
        old = self.pending.get(uid)
        if old is not None and old.request == info.request and old.unsupported == info.unsupported:
            self.pending[uid] = info
            return  # e.g. our own PodScheduled condition: nothing to reschedule
        self._add_pending(info)

    def _add_pending(self, info: PodInfo) -> None:
        uid = info.request.uid
        old = self.pending.get(uid)
        if old is not None:
            self._unindex(old)
        self.pending[uid] = info
        key = gang_key_of(info.request)
        self.members.setdefault(key, set()).add(uid)
        self.touch(key)

    def _unindex(self, info: PodInfo) -> None:
        key = gang_key_of(info.request)
        uids = self.members.get(key)
        if uids is not None:
            uids.discard(info.request.uid)
            if not uids:
                del self.members[key]
        self.touch(key)

    def _drop_pending(self, uid: str) -> None:
        info = self.pending.pop(uid, None)
        if info is not None:
            self._unindex(info)

    def note_started(self, uid: str, started: float) -> None:
        """Record when a pod started; the later stamp wins. Our binder stamps the bind to
        the sub-second, the API's startTime (or creation time) is whole seconds and may
        arrive before or after it: keeping the later one makes two gangs bound within one
        second compare the same way whichever event came first (preemption's work-lost
        order depends on it)."""
        self.started[uid] = max(self.started.get(uid, 0.0), started)

    def _release(self, uid: str) -> None:
        self._drop_pending(uid)
        self._orphans.pop(uid, None)
        self.terminating.discard(uid)
        self.ledger.release(uid)
        self.started.pop(uid, None)
        self.disown(uid)
        snap = self._snapshot
        if snap is not None and snap.pod_state(uid) is not None:
            snap.remove(uid)
            self._capacity()

    def note_forgotten(self, pod: PodRequest) -> None:
        """An assumed pod was given up (its bind failed): its place is free again and its
        gang goes back to the queue."""
        self.ledger.release(pod.uid)
        self.disown(pod.uid)
        self.started.pop(pod.uid, None)
        self._capacity()
        self.touch(gang_key_of(pod))

    def mark_terminating(self, uids: Iterable[str]) -> None:
        """Pods we asked the API to delete: still charged, no longer gang members."""
        self.terminating.update(uids)

    # --- pod groups -------------------------------------------------------------------

    def on_group(self, kind: str, obj: JSON) -> None:
        self._set_group(kind, pod_group_info(obj))

    def on_upstream_group(self, kind: str, obj: JSON) -> None:
        """A scheduling.k8s.io PodGroup (``upstream_groups.py``); a child of a composite
        group also re-forms its parent's gang (``composites.py``)."""
        info = upstream_group_info(obj, self.levels)
        old = self.groups.get(info.key)
        self._set_group(kind, info)
        parents = {g.parent_composite for g in (old, info) if g is not None}
        parents.discard("")
        for parent in parents:
            self._refresh_composite(info.namespace, parent)
        parent_key = (composite_key(info.namespace, info.parent_composite)
                      if info.parent_composite and kind != DELETED else None)
        if self._parent_of.get(info.key) != parent_key:
            if parent_key is None:
                self._parent_of.pop(info.key, None)
            else:
                self._parent_of[info.key] = parent_key
            self._rekey_pending(info.key)

    def on_workload(self, kind: str, obj: JSON) -> None:
        """A scheduling.k8s.io Workload: its composite templates give the composite
        groups of its PodGroups their policy and constraint."""
        key = self.composites.on_workload(kind, obj)
        if key is None:
            return
        parents = {g.parent_composite for g in self.groups.values()
                   if g.namespace == key[0] and g.workload[0] == key[1] and g.parent_composite}
        for parent in parents:
            self._refresh_composite(key[0], parent)

    def on_composite_object(self, kind: str, obj: JSON) -> None:
        """A v1alpha3 CompositePodGroup: the policy and constraint of its children's gang."""
        self._refresh_composite(*self.composites.on_object(kind, obj))

    def _refresh_composite(self, namespace: str, parent: str) -> None:
        children = [g for g in self.groups.values() if g.namespace == namespace
                    and g.parent_composite == parent and not g.children]
        key = composite_key(namespace, parent)
        if not children:
            if self.groups.pop(key, None) is not None:
                self.touch(key)
            return
        found = self.composites.template(namespace, parent, children[0].workload)
        self._set_group("", composite_group_info(namespace, parent, children, found,
                                                 self.levels))

    def _rekeyed(self, info: PodInfo) -> PodInfo:
        """``info`` with its request in its composite group's gang, or as it is."""
        request = in_composite(info.request, self._parent_of)
        return info if request is info.request else dataclasses.replace(info, request=request)

    def _rekey_pending(self, child_key: str) -> None:
        """The pending pods of a child PodGroup follow its composite group (or leave it)."""
        namespace, _, child = child_key.partition("/")
        name = child.removeprefix(UPSTREAM_PREFIX)
        for info in [i for i in self.pending.values() if i.request.namespace == namespace
                     and (i.request.gang == child or (
                         (i.request.gang or "").startswith(COMPOSITE_PREFIX)
                         and i.request.part == name))]:
            if self.ready and self.snapshot.pod_state(info.request.uid) is None:
                self._add_pending(self._rekeyed(info))

    def on_jobset(self, kind: str, obj: JSON) -> None:
        """A JobSet is its pods' gang (``jobsets.py``)."""
        self._set_group(kind, jobset_group_info(obj, self.levels))

    def _set_group(self, kind: str, info: PodGroupInfo) -> None:
        if kind == DELETED:
            self.groups.pop(info.key, None)
        elif self.groups.get(info.key) == info:
            return
        else:
            self.groups[info.key] = info
        self.touch(info.key)

    def on_local_queue(self, kind: str, obj: JSON) -> None:
        """A LocalQueue changed: the gangs waiting in its namespace are re-assembled (their
        queue, or whether they have one, may have changed)."""
        namespace = self.local_queues.on_local_queue(kind, obj)
        if namespace is None:
            return
        prefix = f"{namespace}/"
        for key in [k for k in self.members if k.startswith(prefix)]:
            self.touch(key)

    def own(self, uid: str, priority: int) -> None:
        if uid not in self.ours:
            self.ours[uid] = priority
            self._our_priorities[priority] += 1

    def disown(self, uid: str) -> None:
        priority = self.ours.pop(uid, None)
        if priority is not None:
            self._our_priorities[priority] -= 1
            if not self._our_priorities[priority]:
                del self._our_priorities[priority]

    def lowest_priority(self) -> int | None:
        """The lowest priority of a pod we placed (None: none): a gang at or below it has
        nobody to preempt, known without looking at any pod."""
        return min(self._our_priorities, default=None)

    # --- queries for the loop ---------------------------------------------------------

    def queue_of(self, pod: PodRequest, label: str | None) -> str:
        """The pod's queue: its own label, else its PodGroup's, else the default queue; in
        a LocalQueue namespace through the LocalQueue that label names (``resolve``)."""
        if not label:
            group = self.groups.get(pod.gang_key) if pod.gang_key else None
            label = group.queue if group is not None else None
        return self.resolve_queue(pod.namespace, label)

    def resolve_queue(self, namespace: str, label: str | None) -> str:
        """The queue work labelled ``label`` in ``namespace`` is charged to. A LocalQueue
        that does not exist gives the default queue: only for pods bound before it went
        away (a gang whose LocalQueue is missing is never admitted)."""
        return self.ledger.resolve(self.local_queues.resolve(namespace, label))

    def refusal(self, key: str, members: Iterable[PodInfo]) -> tuple[str, str] | None:
        """(reason, message) when gang ``key`` is never queued as it stands: its namespace
        is not served (binding there would be refused: no RoleBinding), or it is a team's
        namespace and the gang's queue label (the PodGroup's, else a pod's) names no
        LocalQueue there. None: queue it."""
        namespace = key.split("/", 1)[0]
        if not self.config.serves(namespace):
            return NOT_SERVED, not_served_message(self.config.scheduler_name, namespace,
                                                  self.config.namespaces)
        if not self.local_queues.applies(namespace):
            return None
        group = self.groups.get(key)
        label = group.queue if group is not None and group.queue else next(
            (m.queue for m in members if m.queue), None)
        if not self.local_queues.found(namespace, label):
            return LOCAL_QUEUE_NOT_FOUND, self.local_queues.missing_message(namespace, label)
        queue = self.local_queues.resolve(namespace, label) or ""
        if not self.ledger.enabled or queue in self.ledger.queues or queue == self.ledger.default:
            return None
        return CLUSTER_QUEUE_NOT_FOUND, (
            f"LocalQueue {namespace}/{self.local_queues.name_of(label)} points at queue "
            f"{queue}, which {self.config.scheduler_name} does not have (queues: "
            f"{', '.join(sorted(self.ledger.queues))}): fix its clusterQueue in the cluster "
            "spec's scheduler.localQueues")

    def pending_members(self, key: str) -> list[PodInfo]:
        """Pending pods of the gang the snapshot does not track yet (not in flight)."""
        snap = self.snapshot
        out = []
        for uid in self.members.get(key, ()):
            if snap.pod_state(uid) is None:
                out.append(self.pending[uid])
        return out

    def placed_nodes(self, gang_key: str) -> list[NodeInfo]:
        """Nodes of the gang's placed members (one entry per pod), terminating ones not
        counted. O(pods): asked only for gangs the core says already have placements."""
        snap = self.snapshot
        if not snap.placed_members(gang_key):
            return []
        return [
            snap.node(node)
            for pod, node, _ in snap.pods()
            if pod.gang_key == gang_key and pod.uid not in self.terminating
        ]
