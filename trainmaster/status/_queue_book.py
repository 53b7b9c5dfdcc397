"""Why a gang waits, in the scheduler's own words and by its own arithmetic.

The scheduler explains a pending gang itself: its pods' ``PodScheduled=False`` condition
and, with the same message, an Event on its PodGroup (``FailedScheduling``, or
``NamespaceNotServed`` / ``LocalQueueNotFound`` / ``ClusterQueueDoesNotExist`` when it
will not queue the gang as it stands). ``scheduler_reason`` picks that explanation and
rewords nothing.

Quota questions (is it its queue that holds the gang, and what would let it start) are
answered by the scheduler's ``QueueLedger`` (``refusal``, ``fits_without``,
``reclaimable_from``), built from the scheduler's config and charged with the usage it
publishes in its ledger ConfigMap: ``QueueBook``. The queue a gang is charged to is
resolved by the scheduler's ``LocalQueues`` over the LocalQueue objects. `trainmaster
status` and the web view both call this module, so they cannot say different things.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from trainmaster.api import (
    CLUSTER_QUEUE_NOT_FOUND,
    EVENT_FAILED_SCHEDULING,
    EVENT_PREEMPTING,
    LOCAL_QUEUE_NOT_FOUND,
    NAMESPACE_NOT_SERVED,
    POD_SCHEDULED,
    parse_time,
)
from trainmaster.status._fairness import Usage, ledger_usage, pick_config, queue_usage

if TYPE_CHECKING:
    from trainmaster.scheduler import LocalQueues, QueueLedger, SchedulerConfig

JSON = Mapping[str, Any]

SCHEDULER_REASONS = frozenset({EVENT_FAILED_SCHEDULING, NAMESPACE_NOT_SERVED,
                               LOCAL_QUEUE_NOT_FOUND, CLUSTER_QUEUE_NOT_FOUND,
                               EVENT_PREEMPTING})
"""Event reasons by which trainmaster-scheduler says why a gang is not placed yet."""


@dataclass(frozen=True)
class SchedulerSays:
    """The scheduler's own explanation of a pending gang."""

    reason: str
    """``Unschedulable``, ``NamespaceNotServed``, ``FailedScheduling``, ..."""
    message: str
    source: str
    """``PodScheduled`` (its pods' condition) or ``Event``."""

    def __str__(self) -> str:
        return f"{self.reason}: {self.message}" if self.message else self.reason


def scheduler_reason(pods: Iterable[JSON], events: Iterable[JSON] = (),
                     group: tuple[str, str] | None = None) -> SchedulerSays | None:
    """What the scheduler last said about a gang: its pods' ``PodScheduled=False``
    condition (the newest), else the newest of its Events on the PodGroup ``group``
    (namespace, name) or on one of ``pods``; None when it said nothing yet."""
    best: tuple[float, SchedulerSays] | None = None
    names: set[tuple[str, str]] = set()
    for pod in pods:
        meta = pod.get("metadata") or {}
        names.add((str(meta.get("namespace", "")), str(meta.get("name", ""))))
        for cond in (pod.get("status") or {}).get("conditions") or []:
            if cond.get("type") == POD_SCHEDULED and cond.get("status") == "False":
                at = _epoch(cond.get("lastProbeTime") or cond.get("lastTransitionTime"))
                said = SchedulerSays(str(cond.get("reason") or ""),
                                     str(cond.get("message") or ""), POD_SCHEDULED)
                if best is None or at > best[0]:
                    best = (at, said)
    if best is not None:
        return best[1]
    for event in events:
        if event.get("reason") not in SCHEDULER_REASONS:
            continue
        ref = event.get("involvedObject") or {}
        key = (str(ref.get("namespace", "")), str(ref.get("name", "")))
        if not ((ref.get("kind") == "PodGroup" and key == group)
                or (ref.get("kind") == "Pod" and key in names)):
            continue
        at = _epoch(event.get("lastTimestamp") or event.get("eventTime")
                    or (event.get("metadata") or {}).get("creationTimestamp"))
        said = SchedulerSays(str(event["reason"]), str(event.get("message") or ""), "Event")
        if best is None or at >= best[0]:
            best = (at, said)
    return best[1] if best is not None else None


def _epoch(text: object) -> float:
    at = parse_time(text if isinstance(text, str) else None)
    return at.timestamp() if at else 0.0


class QueueBook:
    """The scheduler's queue ledger as it published it, to ask the scheduler's own
    questions of: ``QueueLedger`` built from its config (``charged_ledger``) and charged
    with each queue's published usage (every resource, base units)."""

    def __init__(self, config: SchedulerConfig, ledger: QueueLedger,
                 local_queues: LocalQueues, usage_from: str) -> None:
        self.config = config
        self.ledger = ledger
        self.local_queues = local_queues
        self.usage_from = usage_from
        """``scheduler ledger`` or ``pod labels`` (none published)."""

    @classmethod
    def build(cls, configs: Iterable[JSON], published: Iterable[JSON] | None,
              pods: Iterable[JSON], localqueues: Iterable[JSON] = ()) -> QueueBook | None:
        """The book of the scheduler config whose queues hold most of the usage; None
        without a config that has quotas."""
        from trainmaster.scheduler import LocalQueues, charged_ledger

        usage: Usage = ledger_usage(published) if published is not None \
            else queue_usage(pods)
        config = pick_config(configs, usage)
        if config is None:
            return None
        names = {q.name for q in config.queues}
        ledger = charged_ledger(config.queues, config.cohorts, config.fair_sharing,
                                {q: dict(a) for q, a in usage.items() if q in names})
        local = LocalQueues(config.local_queue_namespaces)
        for lq in localqueues:
            local.on_local_queue("ADDED", lq)
        return cls(config, ledger, local,
                   "scheduler ledger" if published is not None else "pod labels")

    def queue_of(self, namespace: str, label: str | None) -> str | None:
        """The queue a gang labelled ``label`` in ``namespace`` is charged to, as the
        scheduler resolves it; None: its namespace has no such LocalQueue."""
        if not self.local_queues.found(namespace, label):
            return None
        return self.ledger.resolve(self.local_queues.resolve(namespace, label))

    def waiting(self, gangs: Iterable[tuple[str, Mapping[str, int]]]) -> None:
        """What every queue has waiting (fair sharing orders the queues by it), as the
        scheduler sets it at the start of a cycle."""
        if self.ledger.fair.enable:
            self.ledger.set_waiting((q, dict(a)) for q, a in gangs)

    def refusal(self, queue: str, need: Mapping[str, int]) -> str | None:
        """The scheduler's admission answer: why quota (or fair-share order) holds a gang
        needing ``need`` in ``queue`` now; None: quota admits it."""
        if not self.ledger.enabled:
            return None
        return self.ledger.refusal(queue, dict(need))

    def would_start(self, queue: str, need: Mapping[str, int]) -> str | None:
        """What, of the queues' usage, would let quota admit the gang: the scheduler's
        ``reclaimable_from`` (borrowers it may preempt to take the quota back) and
        ``fits_without`` (each queue's running gangs gone in turn, its own first).
        None: quota does not hold it."""
        if self.refusal(queue, need) is None:
            return None
        amounts = dict(need)
        reclaim = sorted(self.ledger.reclaimable_from(queue, amounts))
        if reclaim:
            return (f"its queue {queue} is within its nominal quota with it: the scheduler "
                    f"takes the quota back from {', '.join(reclaim)} (preemption)")
        if self.ledger.quota_refusal(queue, amounts) is None:
            return ("its quota admits it: it starts once fair sharing lets its queue go "
                    "first (a queue further below its share waits for the same capacity)")
        charged = sorted({owner for owner, _ in self._charges()})
        order = [queue, *[q for q in charged if q != queue]] if queue in charged else charged
        for other in order:
            if self.ledger.fits_without(queue, amounts, [_charge_key(other)]):
                whose = "its own queue's" if other == queue else f"queue {other}'s"
                return f"quota admits it once {whose} running gangs finish"
        return "quota does not admit it even with any one queue's running gangs gone"

    def _charges(self) -> Sequence[tuple[str, int]]:
        return [c for c in (self.ledger.charged(_charge_key(q)) for q in self.ledger.queues)
                if c is not None]


def _charge_key(queue: str) -> str:
    """The charge ``charged_ledger`` books a queue's published usage under."""
    return f"usage/{queue}"


@dataclass(frozen=True)
class GangQuota:
    """A pending gang's queue and what quota says of it, from the scheduler's code."""

    queue: str | None
    """The queue the scheduler charges it to (None: its LocalQueue does not exist)."""
    quota: str | None
    """``QueueBook.refusal``: why quota holds it; None: quota admits it."""
    would_start: str | None
    """``QueueBook.would_start``; None when quota does not hold it."""


def gang_quota(book: QueueBook | None, namespace: str, label: str | None,
               pods: Iterable[JSON]) -> GangQuota:
    """The queue and quota answer of a gang whose pending members are ``pods`` (requests
    read by the scheduler's converter), as the web view's why pending gives them."""
    from trainmaster.scheduler import pod_info

    if book is None:
        return GangQuota(label, None, None)
    queue = book.queue_of(namespace, label)
    if queue is None:
        return GangQuota(None, None, None)
    need: dict[str, int] = {}
    for pod in pods:
        for resource, qty in pod_info(dict(pod)).request.requests.items():
            if qty:
                need[resource] = need.get(resource, 0) + qty
    return GangQuota(queue, book.refusal(queue, need), book.would_start(queue, need))


def gang_size(group: JSON | None, members: int, running: int) -> str:
    """``4`` (rigid), or ``2..4 (running 3)`` for an elastic PodGroup (minMember up to
    ``trainmaster.io/max-members``, as the scheduler reads it)."""
    from trainmaster.scheduler import pod_group_info

    if group is not None:
        info = pod_group_info(dict(group))
        if info.max_members is not None:
            return f"{info.min_member}..{info.max_members} (running {running})"
    return str(members)
