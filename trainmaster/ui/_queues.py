"""The queues view: each queue's nominal quota, GPUs in use and borrowed (the ledger the
scheduler publishes, as `trainmaster status` shows it: ``ledger_rows``; by pod label only
when none is published), lent (the scheduler's ``fair_report``), its pending gangs in the
scheduler's order (charged to the queue the scheduler resolves), and the preemptions the
scheduler announced (its ``Preempted`` Events' ``PreemptionRecord``: victim, preemptor,
GPUs freed, work lost, an elastic shrink); and the queue tree's fair sharing, as
`trainmaster status` shows it (``queue_fairness_view``)."""

from __future__ import annotations

from dataclasses import dataclass, field
from datetime import datetime

from trainmaster.api import EVENT_PREEMPTED, GPU_RESOURCE, QUEUE_LABEL, read_preemption
from trainmaster.status import percent, queue_fairness, resource_lines, share_text
from trainmaster.ui._jobs import _event_time
from trainmaster.ui._topology import holds_capacity
from trainmaster.ui._why import Pending, book_of, pending_gangs, queue_summary
from trainmaster.ui._world import World


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
    """GPU-seconds since the victim's last checkpoint (a shrink: of its rescale)."""
    shrink: bool = False
    """An elastic victim shrunk by ``members``, not evicted whole."""
    members: int = 0


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
        record = read_preemption(event)  # the scheduler's figures, not its wording
        if record is None:
            continue
        ref = event.get("involvedObject") or {}
        victim = f"{ref.get('namespace', '')}/{ref.get('name', '')}"
        out.append(Preemption(
            _event_time(event), victim,
            group_queue.get((ref.get("namespace"), ref.get("name"))) or "-",
            record.preemptor, record.queue, record.why, record.gpus,
            round(record.work_lost), record.shrink, record.members))
    return sorted(out, key=lambda p: p.at.timestamp() if p.at else 0.0, reverse=True)


def queue_infos(world: World) -> list[QueueInfo]:
    rows = queue_summary(world)
    # Lent: the scheduler's fair report on its published ledger (``fair_report``), the
    # same figure as the fair-sharing table and `trainmaster status`.
    report = queue_fairness(world.configs, world.ledger,
                            [p for p in world.pods if holds_capacity(p)])
    lent = {n["name"]: r["lent"] for n in (report or {}).get("nodes", [])
            if n["kind"] == "queue" for r in n["resources"] if r["name"] == GPU_RESOURCE}
    infos = {q.name: QueueInfo(q.name, q.nominal_quota, q.in_use, q.borrowed,
                               int(lent.get(q.name, 0)), q.cohort) for q in rows}
    book = book_of(world)
    for p in pending_gangs(world):
        queue = book.queue_of(p.namespace, p.label) if book is not None else p.queue
        name = queue or p.queue
        infos.setdefault(name, QueueInfo(name, None, 0, 0, 0, None)).pending.append(p)
    for pre in preemptions(world):
        # A queue with no quota and nothing pending still shows its preemptions.
        for name in {pre.preemptor_queue, pre.victim_queue} - {"-"}:
            infos.setdefault(name, QueueInfo(name, None, 0, 0, 0, None)).preemptions.append(pre)
    return sorted(infos.values(), key=lambda q: q.name)
