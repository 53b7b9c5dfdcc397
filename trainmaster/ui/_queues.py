"""The queues view: each queue's nominal quota, GPUs in use (the same count as
`trainmaster status`: ``trainmaster.status.queue_rows``), borrowed and lent within its
cohort, its pending gangs in the scheduler's order, and the preemptions the scheduler
announced (its ``Preempted`` Events: victim, preemptor, GPUs freed, work lost)."""

from __future__ import annotations

import re
from collections import defaultdict
from dataclasses import dataclass, field
from datetime import datetime

from trainmaster.api import EVENT_PREEMPTED, QUEUE_LABEL
from trainmaster.ui._jobs import _event_time
from trainmaster.ui._why import Pending, pending_gangs, queue_summary
from trainmaster.ui._world import World

_PREEMPTED = re.compile(
    r"preempted by (?P<by>\S+) \(priority (?P<priority>-?\d+), queue (?P<queue>[^,]+), "
    r"(?P<why>[^)]*)\): (?P<gpus>\d+) GPUs freed, (?P<lost>\d+) GPU-seconds")


@dataclass
class Preemption:
    at: datetime | None
    victim: str
    victim_queue: str
    preemptor: str
    preemptor_queue: str
    why: str
    gpus: int
    work_lost: int
    """GPU-seconds since the victim's last checkpoint."""


@dataclass
class QueueInfo:
    name: str
    nominal: int | None
    in_use: int
    borrowed: int
    lent: int
    cohort: str | None
    pending: list[Pending] = field(default_factory=list)
    preemptions: list[Preemption] = field(default_factory=list)


def preemptions(world: World) -> list[Preemption]:
    group_queue = {((g.get("metadata") or {}).get("namespace"),
                    (g.get("metadata") or {}).get("name")):
                   ((g.get("metadata") or {}).get("labels") or {}).get(QUEUE_LABEL)
                   for g in world.podgroups}
    out = []
    for event in world.events:
        if event.get("reason") != EVENT_PREEMPTED:
            continue
        found = _PREEMPTED.search(event.get("message") or "")
        if found is None:
            continue
        ref = event.get("involvedObject") or {}
        victim = f"{ref.get('namespace', '')}/{ref.get('name', '')}"
        out.append(Preemption(
            _event_time(event), victim,
            group_queue.get((ref.get("namespace"), ref.get("name"))) or "-",
            found["by"], found["queue"], found["why"], int(found["gpus"]),
            int(found["lost"])))
    return sorted(out, key=lambda p: p.at.timestamp() if p.at else 0.0, reverse=True)


def queue_infos(world: World) -> list[QueueInfo]:
    rows = queue_summary(world)
    # Lent: a queue's unused nominal quota that its cohort's borrowers use, handed out
    # in name order (the scheduler does not record who lent to whom).
    borrowed_in: dict[str, int] = defaultdict(int)
    for q in rows:
        if q.cohort:
            borrowed_in[q.cohort] += q.borrowed
    infos: dict[str, QueueInfo] = {}
    for q in rows:
        lent = 0
        if q.cohort and q.nominal_quota is not None:
            spare = max(0, q.nominal_quota - q.in_use)
            lent = min(spare, borrowed_in[q.cohort])
            borrowed_in[q.cohort] -= lent
        infos[q.name] = QueueInfo(q.name, q.nominal_quota, q.in_use, q.borrowed, lent,
                                  q.cohort)
    for p in pending_gangs(world):
        infos.setdefault(p.queue, QueueInfo(p.queue, None, 0, 0, 0, None)).pending.append(p)
    for pre in preemptions(world):
        for name in {pre.preemptor_queue, pre.victim_queue}:
            if name in infos:
                infos[name].preemptions.append(pre)
    return sorted(infos.values(), key=lambda q: q.name)
