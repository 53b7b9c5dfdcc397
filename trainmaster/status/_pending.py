"""The gangs that still wait, as `trainmaster status` lists them: each with the
scheduler's own reason (``scheduler_reason``), the queue it resolves the gang to and its
admission answer on the published ledger (``gang_quota``), and an elastic gang's range
(``gang_size``): the functions the web view's why pending calls too.
"""

from __future__ import annotations

from collections import defaultdict
from collections.abc import Iterable
from dataclasses import dataclass
from typing import Any

from trainmaster.api import POD_GROUP_LABEL, QUEUE_LABEL, TRAININGJOB_KIND
from trainmaster.status._queue_book import QueueBook, gang_quota, gang_size, scheduler_reason

JSON = dict[str, Any]


@dataclass
class PendingGang:
    """A gang the scheduler has not placed yet: a TrainingJob's (``job`` is its name) or
    any other PodGroup's (``job`` is "-"). ``pods``: its members still unbound."""

    namespace: str
    job: str
    gang: str | None
    reason: str
    pods: int | None = None
    queue: str | None = None
    """The queue the scheduler charges it to (None: unknown, or no such LocalQueue)."""
    quota: str | None = None
    """The scheduler's admission answer on its published ledger: why quota holds it."""
    would_start: str | None = None
    """What of the queues' usage would let quota admit it (the scheduler's ledger)."""
    size: str | None = None
    """Members: ``4``, or an elastic gang's ``min..max (running n)``."""


def _key(obj: JSON) -> tuple[str, str]:
    meta = obj.get("metadata") or {}
    return str(meta.get("namespace", "")), str(meta.get("name", ""))


def _group_of(pod: JSON) -> str | None:
    value = ((pod.get("metadata") or {}).get("labels") or {}).get(POD_GROUP_LABEL)
    return str(value) if value else None


def _waiting(unbound: Iterable[JSON]) -> dict[tuple[str, str], list[JSON]]:
    out: dict[tuple[str, str], list[JSON]] = defaultdict(list)
    for pod in unbound:
        group = _group_of(pod)
        if group and not (pod.get("spec") or {}).get("nodeName") \
                and (pod.get("status") or {}).get("phase") in (None, "Pending"):
            out[(_key(pod)[0], group)].append(pod)
    return out


def podgroup_gangs(podgroups: list[JSON], unbound: list[JSON],
                   trainingjobs: list[JSON]) -> list[PendingGang]:
    """PodGroups with members still waiting for a node, except TrainingJobs' gangs (their
    job row already says why, with the operator's words), each with the scheduler's own
    reason."""
    tj_gangs = {(_key(tj)[0], (tj.get("status") or {}).get("gang")) for tj in trainingjobs}
    waiting = _waiting(unbound)
    out = []
    for pg in podgroups:
        key = _key(pg)
        owners = {ref.get("kind") for ref in (pg.get("metadata") or {}).get(
            "ownerReferences") or []}
        if key in tj_gangs or TRAININGJOB_KIND in owners or not waiting.get(key):
            continue
        members = waiting[key]
        said = scheduler_reason(members, (), key)
        want = (pg.get("spec") or {}).get("minMember")
        of = f" of {want}" if isinstance(want, int) else ""
        reason = str(said) if said else "waiting for the scheduler"
        out.append(PendingGang(key[0], "-", key[1],
                               f"{len(members)}{of} pods unscheduled: {reason}", len(members)))
    return sorted(out, key=lambda g: (g.namespace, g.gang or ""))


def explain_pending(pending: list[PendingGang], book: QueueBook | None,
                    podgroups: list[JSON], unbound: list[JSON], bound: list[JSON]) -> None:
    """Each gang's queue, quota answer and size; a TrainingJob's gang whose pods the
    scheduler explained gets the scheduler's words as its reason."""
    groups = {_key(pg): pg for pg in podgroups}
    waiting = _waiting(unbound)
    running: dict[tuple[str, str], int] = defaultdict(int)
    for pod in bound:
        name = _group_of(pod)
        if name:
            running[(_key(pod)[0], name)] += 1
    for row in pending:
        if not row.gang:
            continue
        key = (row.namespace, row.gang)
        members, group = waiting.get(key, []), groups.get(key)
        if row.job != "-":
            said = scheduler_reason(members, (), key)
            if said is not None:
                row.reason = str(said)
        labels = [((o.get("metadata") or {}).get("labels") or {}).get(QUEUE_LABEL)
                  for o in [group or {}, *members]]
        label = next((str(v) for v in labels if v), None)
        found = gang_quota(book, row.namespace, label, members)
        row.queue, row.quota, row.would_start = found.queue, found.quota, found.would_start
        row.size = gang_size(group, len(members), running.get(key, 0))
