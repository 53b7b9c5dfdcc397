"""Why a gang pends, and what would have to change: computed with the scheduler's own
placement code (``place_gang`` and the preemption victim search, as the simulator
imports them), on a ``ClusterState`` built from the API objects with the scheduler's
own converters, so the answer cannot disagree with what the scheduler does.

Per pending gang:

* the scheduler's reason: what it said itself (its pods' PodScheduled=False condition, or
  its Event on the PodGroup: ``trainmaster.status.scheduler_reason``), else the job's
  ``pendingReason`` from the operator;
* the gang as the scheduler assembles it (``assemble``: an elastic gang at min..max, less
  the members it already runs);
* quota: the scheduler's own admission answer (``QueueLedger.refusal``) on the ledger it
  publishes (``trainmaster.status.QueueBook``: every resource, borrowing, LocalQueues);
* placement now (``place_gang``): fits, or the placement's own Unschedulable message;
* one job whose end makes it fit (each running gang taken out in turn, fewest GPUs
  first, only where its domain's free GPUs plus its own could hold the gang);
* else the smallest set of running jobs whose moving makes it fit (``select_victims``:
  the scheduler's minimal victim set, cheapest first);
* held by quota: what would let quota admit it (``QueueBook.would_start``: the ledger's
  ``reclaimable_from`` and ``fits_without``).
"""

from __future__ import annotations

import threading
from collections import defaultdict
from dataclasses import dataclass, field

from trainmaster.api import MAX_MEMBERS_ANNOTATION, POD_GROUP_LABEL, QUEUE_LABEL, parse_time
from trainmaster.kubeclient import JSON
from trainmaster.scheduler import (
    DEFAULT_FILTERS,
    DEFAULT_SCORER,
    GPU,
    ClusterState,
    Gang,
    Placement,
    PodRequest,
    SchedulerConfig,
    Victim,
    Waiting,
    assemble,
    gang_amounts,
    node_info,
    place_gang,
    pod_group_info,
    pod_info,
    select_victims,
)
from trainmaster.status import (
    QueueBook,
    QueueRow,
    gang_size,
    ledger_rows,
    queue_rows,
    scheduler_reason,
    topology_levels,
)
from trainmaster.ui._topology import holds_capacity
from trainmaster.ui._world import World

CANDIDATE_LIMIT = 50
VICTIM_LIMIT = 200
"""Running gangs (fewest GPUs first) the defragmenting search may move."""
"""Running gangs tried one at a time for "fits once X finishes" (fewest GPUs first)."""


@dataclass
class Pending:
    namespace: str
    name: str
    """The TrainingJob's name, or the PodGroup's for a gang of no TrainingJob."""
    gang: str | None
    queue: str
    priority: int
    created: float
    gpus: int
    pods: int
    reason: str
    job: bool
    members: list[PodRequest] = field(default_factory=list)
    topology_group: JSON | None = None
    label: str | None = None
    """Its queue label (a LocalQueue's name in a team namespace)."""
    min_pods: int | None = None
    """An elastic gang's minimum (minMember); None: rigid."""
    max_pods: int | None = None
    """An elastic gang's maximum (``trainmaster.io/max-members``)."""
    running: int = 0
    """Members placed already (an elastic gang that runs and may grow)."""

    @property
    def key(self) -> str:
        return f"{self.namespace}/{self.name}"

    @property
    def size(self) -> str:
        """``4`` (rigid), or ``2..4 (running 3)`` for an elastic gang: as `trainmaster
        status` says it (``gang_size``); a job whose PodGroup is not there yet, by its
        spec's range."""
        if self.topology_group is not None or self.max_pods is None:
            return gang_size(self.topology_group, self.pods, self.running)
        return f"{self.min_pods}..{self.max_pods} (running {self.running})"


@dataclass
class Why:
    pending: Pending
    quota: str | None
    now: str
    counterfactual: str


def _epoch(text: object) -> float:
    at = parse_time(text if isinstance(text, str) else None)
    return at.timestamp() if at else 0.0


def pending_gangs(world: World) -> list[Pending]:
    """Every gang waiting for the scheduler, in the order it tries them: priority
    descending, then creation time, then name (the queue-sort plugin's ``queue_key``)."""
    unbound: dict[tuple[str, str], list[JSON]] = defaultdict(list)
    for pod in world.pods:
        meta = pod.get("metadata") or {}
        group = (meta.get("labels") or {}).get(POD_GROUP_LABEL)
        if group and not (pod.get("spec") or {}).get("nodeName") and \
                (pod.get("status") or {}).get("phase") in (None, "Pending"):
            unbound[(meta.get("namespace", ""), group)].append(pod)
    groups = {((g.get("metadata") or {}).get("namespace", ""),
               (g.get("metadata") or {}).get("name", "")): g for g in world.podgroups}
    placed: dict[tuple[str, str], int] = defaultdict(int)
    for pod in world.pods:
        meta = pod.get("metadata") or {}
        group = (meta.get("labels") or {}).get(POD_GROUP_LABEL)
        if group and holds_capacity(pod):
            placed[(meta.get("namespace", ""), group)] += 1
    out: list[Pending] = []
    claimed: set[tuple[str, str]] = set()
    for tj in world.trainingjobs:
        meta, spec, status = (tj.get(k) or {} for k in ("metadata", "spec", "status"))
        if (status.get("phase") or "New") not in ("Pending", "Restarting", "New"):
            continue
        ns, gang = meta.get("namespace", ""), status.get("gang")
        pods = unbound.get((ns, gang), []) if gang else []
        claimed.add((ns, gang or ""))
        said = scheduler_reason(pods, world.events, (ns, gang)) if gang else None
        out.append(_pending(ns, meta.get("name", ""), gang, pods, groups.get((ns, gang or "")),
                            str(said) if said else
                            status.get("pendingReason") or "waiting for the operator",
                            spec, meta, job=True, running=placed.get((ns, gang or ""), 0)))
    for (ns, group), pods in unbound.items():
        pg = groups.get((ns, group))
        owned = pg is not None and any(
            r.get("kind") == "TrainingJob"
            for r in (pg.get("metadata") or {}).get("ownerReferences") or [])
        if (ns, group) in claimed or owned:
            continue
        said = scheduler_reason(pods, world.events, (ns, group))
        out.append(_pending(ns, group, group, pods, pg,
                            str(said) if said else "waiting for the scheduler", {},
                            (pg or {}).get("metadata") or {}, job=False,
                            running=placed.get((ns, group), 0)))
    return sorted(out, key=lambda p: (-p.priority, p.created, p.key))


def _pending(ns: str, name: str, gang: str | None, pods: list[JSON], group: JSON | None,
             reason: str, spec: JSON, meta: JSON, *, job: bool, running: int = 0) -> Pending:
    members = [pod_info(p).request for p in pods if (p.get("metadata") or {}).get("uid")]
    if not members and spec:
        # The gang's pods are not created yet: the job's shape (nodes x gpusPerPod).
        gpus = int(spec.get("gpusPerPod") or 8)
        members = [PodRequest(f"{name}-{i}", namespace=ns, requests={GPU: gpus},
                              gang=gang or name, priority=int(spec.get("priority") or 0))
                   for i in range(int(spec.get("nodes") or 0))]
    labels = meta.get("labels") or {}
    label = (spec.get("queue") or labels.get(QUEUE_LABEL)
             or next((((p.get("metadata") or {}).get("labels") or {}).get(QUEUE_LABEL)
                      for p in pods), None))
    priority = max((m.priority for m in members), default=int(spec.get("priority") or 0))
    low, high = _elastic_range(group, spec)
    return Pending(ns, name, gang, str(label or "default"), priority,
                   _epoch(meta.get("creationTimestamp")),
                   sum(m.requests.get(GPU, 0) for m in members), len(members), reason, job,
                   members, group, label, low, high, running)


def _elastic_range(group: JSON | None, spec: JSON) -> tuple[int | None, int | None]:
    """(minMember, max-members) of an elastic PodGroup, else of the job's ``elastic``."""
    if group is not None:
        info = pod_group_info(group)
        if info.max_members is not None:
            return info.min_member, info.max_members
        if MAX_MEMBERS_ANNOTATION in ((group.get("metadata") or {}).get("annotations") or {}):
            return None, None  # unreadable: the scheduler treats it as rigid
    elastic = spec.get("elastic") or {}
    if elastic.get("maxNodes"):
        return int(elastic.get("minNodes") or 1), int(elastic["maxNodes"])
    return None, None


class Counterfactuals:
    """The cluster state built once, then asked about each pending gang; ``advance``
    brings it to a newer world by its changes only (the store replaces an object when it
    changes, so an object that is still the same one needs no conversion)."""

    def __init__(self, world: World) -> None:
        # explain() takes gangs out of the state and puts them back, and advance()
        # changes it: one at a time.
        self._lock = threading.Lock()
        self._build(world)

    def _build(self, world: World) -> None:
        self.levels = tuple(topology_levels(world.nodes))
        self._nodes = {(n.get("metadata") or {}).get("name", ""): n for n in world.nodes}
        self.state = ClusterState([node_info(n, self.levels) for n in world.nodes],
                                  levels=self.levels)
        self._book(world)
        self.running: dict[str, list[tuple[PodRequest, str]]] = defaultdict(list)
        self._pods: dict[str, tuple[JSON, str]] = {}
        """uid -> (the pod object, its gang's key)."""
        for uid, pod in self._bound(world.pods).items():
            self._add_pod(uid, pod)

    def _book(self, world: World) -> None:
        """The scheduler's ledger as published, and its config (the gangs' topology
        policy); without one, the default config at the nodes' levels."""
        self.book = book_of(world)
        if self.book is not None and tuple(self.book.config.levels) == self.levels:
            self.config = self.book.config
        else:
            self.config = SchedulerConfig(levels=self.levels) if self.levels \
                else SchedulerConfig()

    def _bound(self, pods: list[JSON]) -> dict[str, JSON]:
        """uid -> pod, for the pods that hold capacity on a known node."""
        out = {}
        for pod in pods:
            uid = (pod.get("metadata") or {}).get("uid")
            if uid and holds_capacity(pod) and pod["spec"]["nodeName"] in self._nodes:
                out[uid] = pod
        return out

    def _add_pod(self, uid: str, pod: JSON) -> None:
        node = pod["spec"]["nodeName"]
        request = pod_info(pod).request
        self.state.add_bound(request, node)
        meta = pod.get("metadata") or {}
        group = (meta.get("labels") or {}).get(POD_GROUP_LABEL)
        key = f"{meta.get('namespace', '')}/{group or meta.get('name', '')}"
        self.running[key].append((request, node))
        self._pods[uid] = (pod, key)

    def _drop_pod(self, uid: str) -> None:
        key = self._pods.pop(uid)[1]
        self.state.remove(uid)
        left = [(r, n) for r, n in self.running[key] if r.uid != uid]
        if left:
            self.running[key] = left
        else:
            del self.running[key]

    def advance(self, world: World) -> int:
        """Bring the state to ``world``; return how many objects changed. A pod or node
        that is the same object as before costs an identity check; a changed one, what
        the scheduler's cache does on that watch event. New topology levels: built
        again."""
        with self._lock:
            if tuple(topology_levels(world.nodes)) != self.levels:
                self._build(world)
                return len(world.nodes) + len(world.pods)
            nodes = {(n.get("metadata") or {}).get("name", ""): n for n in world.nodes}
            changed = 0
            old_nodes, self._nodes = self._nodes, nodes
            pods = self._bound(world.pods)
            for uid, (pod, _) in list(self._pods.items()):
                if pods.get(uid) is not pod:  # gone, finished or changed
                    self._drop_pod(uid)
                    changed += 1
            for name in old_nodes.keys() - nodes.keys():
                self.state.remove_node(name)
                changed += 1
            for name, node in nodes.items():
                if old_nodes.get(name) is not node:
                    self.state.set_node(node_info(node, self.levels))
                    changed += 1
            for uid, pod in pods.items():
                if uid not in self._pods:
                    self._add_pod(uid, pod)
                    changed += 1
            self._book(world)
            return changed

    def gang(self, p: Pending) -> Gang | Waiting:
        """The gang as the scheduler assembles it (``assemble``): its PodGroup's topology
        or the config's policy, an elastic gang's range less the members it runs."""
        if p.topology_group is None:
            # No PodGroup yet (a job's gang not created): the job's shape, rigid.
            return Gang(p.gang or p.name, tuple(p.members), namespace=p.namespace,
                        topology=self.config.topology_for(len(p.members)),
                        priority=p.priority, creation_timestamp=p.created)
        placed = [self.state.node(n) for _, n in self.running.get(f"{p.namespace}/{p.gang}", [])]
        return assemble(f"{p.namespace}/{p.gang}", pod_group_info(p.topology_group),
                        p.members, placed, self.config)

    def queue_of(self, p: Pending) -> str | None:
        """The queue the scheduler charges the gang to (None: no such LocalQueue)."""
        return p.queue if self.book is None else self.book.queue_of(p.namespace, p.label)

    def quota(self, p: Pending, gang: Gang | Waiting | None = None) -> str | None:
        """The scheduler's admission answer on its published ledger: why quota (or
        fair-share order) holds the gang now; None: quota admits it."""
        if self.book is None:
            return None
        queue = self.queue_of(p)
        if queue is None:
            return None  # the scheduler's own reason names the missing LocalQueue
        gang = gang if gang is not None else self.gang(p)
        members = gang.members if isinstance(gang, Gang) else tuple(p.members)
        need = gang_amounts(Gang(p.name, members, namespace=p.namespace))
        return self.book.refusal(queue, need)

    def explain_now(self, p: Pending) -> Why:
        """Reason, quota and placement now, without the counterfactual search."""
        if not p.members:
            return Why(p, self.quota(p), "no pods to place yet", "-")
        with self._lock:
            gang = self.gang(p)
            quota = self.quota(p, gang)
            if isinstance(gang, Waiting):
                return Why(p, quota, gang.reason, "-")
            result = place_gang(self.state, gang)
        now = f"fits now on {where(result)}" if isinstance(result, Placement) \
            else result.reason
        return Why(p, quota, now, "not searched: only the first gangs the scheduler will "
                   "try get a counterfactual")

    def explain(self, p: Pending) -> Why:
        with self._lock:
            return self._explain(p)

    def _explain(self, p: Pending) -> Why:
        if not p.members:
            return Why(p, self.quota(p), "no pods to place yet", "-")
        gang = self.gang(p)
        quota = self.quota(p, gang)
        if isinstance(gang, Waiting):
            return Why(p, quota, gang.reason, "-")
        result = place_gang(self.state, gang)
        if isinstance(result, Placement):
            now = f"fits now on {where(result)}"
            if quota:
                return Why(p, quota, now, self._quota_counterfactual(p, gang))
            return Why(p, quota, now, "nothing has to change: the scheduler places it on "
                       "its next cycle")
        now = result.reason
        single = self._once_finished(gang)
        if single is not None:
            return Why(p, quota, now, single)
        return Why(p, quota, now, self._defragment(gang))

    def _quota_counterfactual(self, p: Pending, gang: Gang) -> str:
        queue = self.queue_of(p)
        found = None
        if self.book is not None and queue is not None:
            found = self.book.would_start(queue, gang_amounts(gang))
        return f"placement fits; {found}" if found else "placement fits"

    def _once_finished(self, gang: Gang) -> str | None:
        need = sum(m.requests.get(GPU, 0) for m in gang.members)
        rank = 1  # the lowest level's domains (leaves); rank 0 is the node
        free_by_leaf = {d.name: d.free.get(GPU, 0) for d in self.state.live_domains(rank)} \
            if self.levels else {}
        tried = 0
        for key, pods in sorted(self.running.items(),
                                key=lambda kv: (sum(p.requests.get(GPU, 0)
                                                    for p, _ in kv[1]), kv[0])):
            if tried >= CANDIDATE_LIMIT:
                break
            if free_by_leaf:
                leaves = {"/".join(self.state.node(n).topology) for _, n in pods
                          if self.state.node(n).topology}
                mine = sum(p.requests.get(GPU, 0) for p, _ in pods)
                if not any(free_by_leaf.get(leaf, 0) + mine >= need for leaf in leaves) \
                        and gang.topology.level != "cluster":
                    continue
            tried += 1
            for pod, _ in pods:
                self.state.remove(pod.uid)
            try:
                result = place_gang(self.state, gang)
            finally:
                for pod, node in pods:
                    self.state.add_bound(pod, node)
            if isinstance(result, Placement):
                return f"fits on {where(result)} once job {key} finishes"
        return None

    def _defragment(self, gang: Gang) -> str:
        # The smallest running gangs: moving small jobs is what defragmenting means, and
        # the victim search's cost grows with its candidates.
        smallest = sorted(self.running.items(),
                          key=lambda kv: (sum(p.requests.get(GPU, 0) for p, _ in kv[1]), kv[0]))
        victims = [Victim(key, max((p.priority for p, _ in pods), default=0), tuple(pods))
                   for key, pods in smallest[:VICTIM_LIMIT]]
        found = select_victims(self.state, gang, victims, filters=DEFAULT_FILTERS,
                               scorer=DEFAULT_SCORER)
        if found is None:
            every = "every running job" if len(victims) == len(self.running) \
                else f"the {len(victims)} smallest running jobs"
            return f"does not fit even with {every} gone: the cluster is too small or " \
                   "its nodes do not match (see the reason)"
        names = ", ".join(v.gang for v in found.victims)
        place = found.placement
        return (f"fits on {where(place)} after moving "
                f"{len(found.victims)} job(s) ({names}: {sum(v.gpus for v in found.victims)} "
                "GPUs)")


def where(placement: Placement) -> str:
    """``leaf leaf-3`` (a domain's name is its path, ``spine-0/leaf-3``)."""
    return f"{placement.level} {placement.domain.rsplit('/', 1)[-1]}"


def book_of(world: World) -> QueueBook | None:
    """The scheduler's published ledger and config, as ``trainmaster status`` reads them."""
    return QueueBook.build(world.configs, world.ledger,
                           [p for p in world.pods if holds_capacity(p)], world.localqueues)


def why_pending(world: World, limit: int | None = None,
                counterfactuals: int | None = None) -> list[Why]:
    """The first ``limit`` pending gangs in the scheduler's order, each placed now; the
    first ``counterfactuals`` of them also with what would make them fit (each costs up
    to ``CANDIDATE_LIMIT`` placements)."""
    pending = pending_gangs(world)[:limit]
    if not pending:
        return []
    cf = Counterfactuals(world)
    out = []
    for i, p in enumerate(pending):
        deep = counterfactuals is None or i < counterfactuals
        out.append(cf.explain(p) if deep else cf.explain_now(p))
    return out


def queue_summary(world: World) -> list[QueueRow]:
    """The queues as the scheduler published them (its ledger), else by pod label: the
    rows `trainmaster status` shows."""
    if world.ledger is not None:
        return ledger_rows(world.ledger)
    return queue_rows([p for p in world.pods if holds_capacity(p)], world.queues)
