"""Preemption in the runtime: queue admission, who may preempt whom, and the evictions.

* ``QuotaAdmission`` is the core's ``Admission``: a gang starts only while its queue's
  GPUs in use plus the gang's stay within the queue's quota (``_quota``).
* ``Preemptor.try_preempt`` runs for a gang the cycle could not place (not for one
  held by its quota). It preempts only if the scheduler's ``preemption`` is on, the
  gang's queue does not switch it off, its pods' ``preemptionPolicy`` is
  ``PreemptLowerPriority``, and no victims of its last preemption are still leaving.
  Victims: our own running gangs of lower priority, plus (for a queue within its
  nominal quota) gangs of queues that borrow from its cohort; priced by ``priced`` and
  chosen by ``nominate_victims``, as in the simulator.
* Evicting: each victim pod gets a ``DisruptionTarget`` condition (reason
  ``PreemptionByScheduler``, naming the preemptor: the operator reads it), then a
  graceful delete (its own grace period, uid precondition); each victim gang gets a
  ``Preempted`` Event naming the preemptor. The evictions go out at once, every pod of
  one preemption concurrently (``ApiWriter.submit_now``): not queued behind the Events
  and reports, and never held back while binds are in flight (reports wait for those):
  the preemptor binds only once its victims are gone. The freed nodes are nominated: the core
  blocks them for every other gang, and each preemptor pod's
  ``status.nominatedNodeName`` records them so a restarted scheduler keeps the
  reservation (``nominations``) and, since the victims are terminating, evicts nothing
  twice.
"""

from __future__ import annotations

import asyncio
import functools
import logging
import time
from collections.abc import Callable, Sequence

from trainmaster.api import (
    FAIR_SHARING,
    HIGHER_PRIORITY,
    RECLAIM,
    PreemptionRecord,
    preemption_annotations,
)
from trainmaster.kubeclient import ApiError, Kube, pod_path

from .._keys import (
    DISRUPTION_TARGET,
    EVENT_PREEMPTED,
    EVENT_PREEMPTING,
    PREEMPTION_BY_SCHEDULER,
)
from ..framework.model import Gang, PodRequest
from ..framework.results import Placement
from ..framework.status import Code, Status
from ..placement.fair_victims import (
    Candidate,
    may_preempt_for_quota,
    priced_candidates,
    quota_admits,
)
from ..placement.victims import nominate_victims
from ..plugins.preemption import Preemption, Victim, with_shrinks
from ..plugins.quota import gang_amounts
from ..state import PodState
from .cache import ClusterCache
from .config import SchedulerConfig
from .events import ApiWriter, EventRecorder, ObjectRef, now_rfc3339
from .gang_scheduler import GangScheduler
from .gangs import gang_key_of
from .metrics import SchedulerMetrics
from .report import event_ref

log = logging.getLogger("trainmaster.scheduler")


class QuotaAdmission:
    """The core's ``Admission`` over the cache's queue ledger."""

    def __init__(self, cache: ClusterCache) -> None:
        self.cache = cache
        self.refused: dict[str, str] = {}
        """gang -> why its quota holds it (cleared when admitted)."""

    def label_of_gang(self, gang: Gang) -> str | None:
        """The queue label of a gang: its PodGroup's, else its first labelled pod's."""
        group = self.cache.groups.get(gang.key)
        if group is not None and group.queue:
            return group.queue
        for member in gang.members:
            info = self.cache.pending.get(member.uid)
            if info is not None and info.queue:
                return info.queue
        return None

    def queue_of_gang(self, gang: Gang) -> str:
        """The queue the gang is charged to (its label, resolved through its namespace's
        LocalQueue where the namespace has them)."""
        return self.cache.resolve_queue(gang.namespace, self.label_of_gang(gang))

    def refusal(self, gang: Gang) -> str | None:
        ledger = self.cache.ledger
        if not ledger.enabled:
            return None
        reason = ledger.refusal(self.queue_of_gang(gang), gang_amounts(gang))
        if reason is None:
            self.refused.pop(gang.key, None)
        else:
            self.refused[gang.key] = reason
        return reason

    def retry_scope(self, gang: Gang) -> str | None:
        return self.cache.ledger.retry_scope(self.queue_of_gang(gang))

    def releases(self, scope: str) -> int:
        return self.cache.ledger.releases(scope)

    def cycle_start(self, gangs: Sequence[Gang]) -> None:
        """Fair sharing: what every queue has waiting this cycle."""
        ledger = self.cache.ledger
        if ledger.fair.enable:
            ledger.set_waiting((self.queue_of_gang(g), gang_amounts(g)) for g in gangs)

    def preemptible(self, gang: Gang) -> bool:
        return may_preempt_for_quota(self.cache.ledger, self.queue_of_gang(gang),
                                     gang_amounts(gang))

    def admitted(self, gang: Gang, placement: Placement) -> None:
        cache = self.cache
        now = time.time()
        for binding in placement.bindings:
            cache.own(binding.pod.uid, binding.pod.priority)
            # The later of our bind time and the API's (whole-second) startTime, in
            # whichever order they arrive: see ClusterCache.note_started.
            cache.note_started(binding.pod.uid, now)
        if not cache.ledger.enabled:
            return
        queue = self.queue_of_gang(gang)
        cache.ledger.admitted_waiting(queue, gang_amounts(gang))
        for binding in placement.bindings:
            cache.ledger.charge(binding.pod.uid, queue, binding.pod.requests)


class Preemptor:
    def __init__(
        self,
        api: Kube,
        cache: ClusterCache,
        config: SchedulerConfig,
        recorder: EventRecorder,
        writer: ApiWriter,
        metrics: SchedulerMetrics,
        admission: QuotaAdmission,
        wall: Callable[[], float] = time.time,
    ) -> None:
        self.api = api
        self.cache = cache
        self.config = config
        self.recorder = recorder
        self.writer = writer
        self.metrics = metrics
        self.admission = admission
        self._wall = wall
        self.evicting: dict[str, set[str]] = {}
        """preemptor gang -> uids of its victims not yet gone."""
        self.preemptions = 0

    # --- who may preempt, and whom ----------------------------------------------------

    def may_preempt(self, gang: Gang, nominated: frozenset[str]) -> bool:
        if not self.config.preemption:
            return False
        if gang.key in self.admission.refused and not may_preempt_for_quota(
                self.cache.ledger, self.admission.queue_of_gang(gang), gang_amounts(gang)):
            return False
        if nominated and any(node in nominated for pod, node, _ in self.cache.snapshot.pods()
                             if pod.uid in self.cache.terminating):
            return False  # its nodes are still being freed (maybe by a previous leader)
        queue = self.cache.ledger.queues.get(self.admission.queue_of_gang(gang))
        if queue is not None and not queue.preemption:
            return False
        for member in gang.members:
            info = self.cache.pending.get(member.uid)
            if info is None or not info.preempts:
                return False
        victims = self.evicting.get(gang.key)
        if victims:
            still = {uid for uid in victims if self.cache.snapshot.pod_state(uid) is not None}
            if still:
                return False  # wait for the last victims to leave
            del self.evicting[gang.key]
        return True

    def candidates(self, gang: Gang) -> list[Victim]:
        """Our running gangs ``gang`` may evict, priced: lower priority, borrowers of
        what its queue lent, and (fair sharing) borrowers above its share."""
        cache, ledger = self.cache, self.cache.ledger
        members: dict[str, list[tuple[PodRequest, str]]] = {}
        unfit: set[str] = set()
        for pod, node, state in cache.snapshot.pods():
            key = gang_key_of(pod)
            if state is not PodState.BOUND or pod.uid in cache.terminating \
                    or pod.uid not in cache.ours:
                unfit.add(key)
                continue
            members.setdefault(key, []).append((pod, node))
        now = self._wall()
        running = []
        minimum: dict[str, int] = {}  # elastic gangs: shrinking them is the cheap option
        for key, pods in members.items():
            if key in unfit or key == gang.key:
                continue
            priority = max(p.priority for p, _ in pods)
            charged = ledger.charged(pods[0][0].uid)
            victim_queue = charged[0] if charged else ledger.default
            group = cache.groups.get(key)
            checkpoint = group.last_checkpoint if group is not None else 0.0
            restart = group.restart_seconds if group is not None else 0.0
            if group is not None and group.elastic:
                minimum[key] = group.min_member
            started = min(cache.started.get(p.uid, now) for p, _ in pods)
            running.append(Candidate(Victim(key, priority, tuple(pods)), victim_queue,
                                     max(started, checkpoint), restart))
        return with_shrinks(priced_candidates(ledger, self.admission.queue_of_gang(gang),
                                              gang_amounts(gang), gang.priority, now,
                                              running), minimum)

    def try_preempt(self, sched: GangScheduler, gang: Gang) -> Preemption | None:
        if not self.config.preemption:
            return None
        ledger, queue, need = self.cache.ledger, self.admission.queue_of_gang(gang), \
            gang_amounts(gang)
        lowest = self.cache.lowest_priority()
        if not ledger.reclaimable_from(queue, need) and not ledger.fair.enable \
                and (lowest is None or lowest >= gang.priority):
            return None  # nobody below it (the common case: one priority): no pod scan
        if not self.may_preempt(gang, sched.nominated.get(gang.key, frozenset())):
            return None
        candidates = sched.guard.allowed(self.candidates(gang), gang.priority, sched.now())
        if not candidates:
            return None
        found = nominate_victims(self.cache.snapshot, gang, candidates, sched.nominated,
                                 filters=sched.profile.filters, scorer=sched.profile.scorer,
                                 admits=quota_admits(ledger, queue, need))
        if found is None:
            return None
        sched.preempted(gang)
        uids = {pod.uid for v in found.victims for pod, _ in v.pods}
        self.evicting[gang.key] = uids
        self.cache.mark_terminating(uids)
        self.preemptions += 1
        queue = self.admission.queue_of_gang(gang)
        self.metrics.preemptions.labels(queue).inc(len(found.victims))
        log.info("gang %s preempts %s in %s %s (%.0f GPU-seconds lost) on %s", gang.key,
                 ", ".join(v.gang for v in found.victims), found.placement.level,
                 found.domain, found.work_lost, sorted(found.nodes))
        self.evict(found.victims, gang, found)
        self._announce_preemptor(found, gang)
        for binding in found.placement.bindings:
            self.writer.submit(functools.partial(self._nominate, binding.pod, binding.node))
        return found

    # --- API writes -------------------------------------------------------------------

    def evict(self, victims: Sequence[Victim], preemptor: Gang,
              found: Preemption | None = None) -> None:
        """The runtime's evict port: every victim pod marked ``DisruptionTarget`` and
        deleted gracefully, all at once and off the cycle; then a ``Preempted`` Event
        per victim gang."""
        pods = [pod for victim in victims for pod, _ in victim.pods]
        self.writer.submit_now(functools.partial(self._evict_all, pods, preemptor))
        queue = self.admission.queue_of_gang(preemptor)
        for victim in victims:
            self._announce(victim, preemptor, queue, found)

    def post_filter(self, sched: GangScheduler, gang: Gang) -> Status:
        """``try_preempt`` as a post-filter answer (the cycle's ``PostFilterPlugin``)."""
        found = self.try_preempt(sched, gang)
        if found is None:
            return Status(Code.UNSCHEDULABLE, (), "Preemption")
        return Status(Code.SUCCESS, (preempting_message(found),), "Preemption")

    def _ref(self, key: str, pod: PodRequest) -> ObjectRef:
        """The gang's object as every other Event about it names it (a JobSet's gang: the
        JobSet; a PodGroup's: the PodGroup; a lone pod: the pod)."""
        return event_ref(self.cache.groups.get(key), (pod,))

    def _announce_preemptor(self, found: Preemption, gang: Gang) -> None:
        self.recorder.event(self._ref(gang.key, gang.members[0]), "Normal", EVENT_PREEMPTING,
                            preempting_message(found))

    def _announce(self, victim: Victim, gang: Gang, queue: str,
                  found: Preemption | None = None) -> None:
        ref = self._ref(victim.gang, victim.pods[0][0])
        kind = FAIR_SHARING if victim.share else RECLAIM if victim.borrowed \
            else HIGHER_PRIORITY
        why = f"{kind}, its side's share {victim.share:.3g}" if victim.share else kind
        cost = (f"shrunk by {len(victim.pods)} members (elastic): {victim.gpus} GPUs freed, "
                f"{victim.work_lost:.0f} GPU-seconds of rescale" if victim.shrink else
                f"{victim.gpus} GPUs freed, {victim.work_lost:.0f} GPU-seconds since the last "
                "checkpoint")
        where = (f" to free {found.placement.level} {found.domain} "
                 f"({found.work_lost:.0f} GPU-seconds lost in all)" if found else "")
        self.recorder.event(
            ref, "Warning", EVENT_PREEMPTED,
            f"preempted by {gang.key} (priority {gang.priority}, queue {queue}, {why})"
            f"{where}: {cost}",
            preemption_annotations(PreemptionRecord(
                gang.key, gang.priority, queue, kind, victim.gpus, victim.work_lost,
                victim.shrink, len(victim.pods))),
        )

    async def _evict_all(self, pods: Sequence[PodRequest], gang: Gang) -> None:
        began = time.monotonic()
        await asyncio.gather(*(self._evict(pod, gang) for pod in pods))
        log.info("gang %s: %d victim pods evicted in %.3f s", gang.key, len(pods),
                 time.monotonic() - began)

    async def _evict(self, pod: PodRequest, gang: Gang) -> None:
        condition = {"status": {"conditions": [{
            "type": DISRUPTION_TARGET, "status": "True", "reason": PREEMPTION_BY_SCHEDULER,
            "message": f"{self.config.scheduler_name}: preempted by {gang.key}",
            "lastTransitionTime": now_rfc3339(),
        }]}}  # fmt: skip
        try:
            await self.api.patch(pod_path(pod.namespace, pod.name, "status"), condition,
                                 "strategic")
        except ApiError as err:
            if err.status == 404:
                return
            log.warning("preemption: marking %s failed: %s", pod.key, err)
        body = {"apiVersion": "v1", "kind": "DeleteOptions", "preconditions": {"uid": pod.uid}}
        for attempt in range(self.config.bind_attempts):
            try:
                await self.api.delete(pod_path(pod.namespace, pod.name), body)
                return
            except ApiError as err:
                if err.status in (404, 409):
                    return
                if not err.transient or attempt == self.config.bind_attempts - 1:
                    log.error("preemption: deleting %s failed: %s", pod.key, err)
                    return
                await asyncio.sleep(0.2 * 2**attempt)

    async def _nominate(self, pod: PodRequest, node: str) -> None:
        try:
            await self.api.patch(pod_path(pod.namespace, pod.name, "status"),
                                 {"status": {"nominatedNodeName": node}})
        except ApiError as err:
            # 404: gone; 422: already bound (the bind overtook this write): moot either way
            if err.status not in (404, 422):
                log.warning("nominating %s for %s failed: %s", node, pod.key, err)


def preempting_message(found: Preemption) -> str:
    """What the preemptor's Event and its "why pending" say: the domain freed, the
    victims and the work they lose."""
    names = ", ".join(v.gang for v in found.victims)
    return (f"preempting {len(found.victims)} gangs ({names}) to free "
            f"{found.placement.level} {found.domain}: {found.work_lost:.0f} GPU-seconds "
            "of work lost")


def nominations(cache: ClusterCache, gang: Gang) -> frozenset[str]:
    """Nodes the gang's pods were nominated to (by this or a previous leader)."""
    out = set()
    for member in gang.members:
        info = cache.pending.get(member.uid)
        if info is not None and info.nominated_node:
            out.add(info.nominated_node)
    return frozenset(out)
