"""The queues view: each queue's nominal quota, GPUs in use (the same count as
`trainmaster status`: ``trainmaster.status.queue_rows``), borrowed and lent within its
cohort, its pending gangs in the scheduler's order, and the preemptions the scheduler
announced (its ``Preempted`` Events: victim, preemptor, GPUs freed, work lost); and the
queue tree's fair sharing, as `trainmaster status` shows it (``queue_fairness_view``)."""

from __future__ import annotations

import re
from collections import defaultdict
from dataclasses import dataclass, field
from datetime import datetime

from trainmaster.api import EVENT_PREEMPTED, QUEUE_LABEL
from trainmaster.status import percent, queue_fairness, resource_lines, share_text
from trainmaster.ui._jobs import _event_time
from trainmaster.ui._topology import holds_capacity
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


@dataclass(frozen=True)
class FairRow:
    """One queue or cohort of the tree as the page shows it (``trainmaster status``'s
    fairness section: the same report, the same words)."""

    name: str
    kind: str
    depth: int
    weight: str
    share: str
    entitlement: str
    held: str
    resources: tuple[str, ...]


@dataclass(frozen=True)
class Fairness:
    enabled: bool
    rows: tuple[FairRow, ...]


def queue_fairness_view(world: World) -> Fairness | None:
    """The queue tree's fair sharing from ``trainmaster.status.queue_fairness`` (the
    scheduler's ``fair_report``) on the published ledger, else on the pods by label."""
    report = queue_fairness(world.configs, world.ledger,
                            [p for p in world.pods if holds_capacity(p)])
    if report is None:
        return None
    return Fairness(bool(report["fair_sharing"]), tuple(
        FairRow(n["name"], n["kind"], n["depth"], f"{n['weight']:g}", share_text(n),
                percent(n["entitlement"]), percent(n["held"]), tuple(resource_lines(n)))
        for n in report["nodes"]))


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
