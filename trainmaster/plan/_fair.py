"""The fair-sharing entitlements a change gives each queue and cohort, before -> after.

Each side's spec is rendered to the scheduler's config (``scheduler_config``, what the
Deployment mounts), read back by the scheduler's own parser and handed to its
``fair_report`` on an idle tree: the entitlement is the node's weight over its cohort's
(``trainmaster status`` compares the live share with the same figure), and ``entitled`` is
that part of the cohort's pool of GPUs. Only rows that change are listed.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from trainmaster.api import GPU_RESOURCE
from trainmaster.objects import scheduler_config
from trainmaster.spec import ClusterSpec


@dataclass(frozen=True)
class Entitlement:
    """One side of a queue or cohort: its cohort, weight, GPU quota (its subtree's for a
    cohort) and fair-sharing entitlement."""

    parent: str | None
    weight: float
    nominal_gpus: int | None
    entitlement: float | None
    entitled_gpus: float | None

    @property
    def above_quota(self) -> bool:
        """Entitled to more GPUs than its own quota: the rest comes only by borrowing."""
        return (self.entitled_gpus is not None and self.nominal_gpus is not None
                and self.entitled_gpus > self.nominal_gpus + 1e-9)

    @property
    def pool_gpus(self) -> float | None:
        """The GPUs its cohort holds (what the entitlement is a part of)."""
        if self.entitled_gpus is None or not self.entitlement:
            return None
        return self.entitled_gpus / self.entitlement

    def to_json(self) -> dict[str, Any]:
        return {"cohort": self.parent, "weight": self.weight,
                "nominalGpus": self.nominal_gpus,
                "entitlement": None if self.entitlement is None else round(self.entitlement, 4),
                "entitledGpus": None if self.entitled_gpus is None
                else round(self.entitled_gpus, 2),
                "aboveQuota": self.above_quota}


@dataclass(frozen=True)
class EntitlementChange:
    name: str
    kind: str
    """``queue`` or ``cohort``."""
    before: Entitlement | None
    after: Entitlement | None

    def to_json(self) -> dict[str, Any]:
        return {"name": self.name, "kind": self.kind,
                "before": None if self.before is None else self.before.to_json(),
                "after": None if self.after is None else self.after.to_json()}


def entitlements(spec: ClusterSpec | None) -> dict[tuple[str, str], Entitlement]:
    """(kind, name) -> the node's figures, from the scheduler's own report; empty when
    no queue has a quota."""
    from trainmaster.scheduler import SchedulerConfig, charged_ledger, fair_report

    if spec is None:
        return {}
    config = SchedulerConfig.from_mapping(scheduler_config(spec))
    if not any(q.limited for q in config.queues):
        return {}
    report = fair_report(charged_ledger(config.queues, config.cohorts, config.fair_sharing))
    out = {}
    for node in report.nodes:
        gpu = next((r for r in node.resources if r.name == GPU_RESOURCE), None)
        out[(node.kind, node.name)] = Entitlement(
            node.parent, node.weight, None if gpu is None else gpu.nominal, node.entitlement,
            node.entitled.get(GPU_RESOURCE))
    return out


def entitlement_changes(base: ClusterSpec | None,
                        head: ClusterSpec | None) -> tuple[EntitlementChange, ...]:
    """Queues and cohorts whose cohort, weight, quota or entitlement the change moves
    (queues first, then cohorts, by name)."""
    before, after = entitlements(base), entitlements(head)
    keys = sorted(before.keys() | after.keys(), key=lambda k: (k[0] != "queue", k[1]))
    return tuple(EntitlementChange(name, kind, before.get((kind, name)),
                                   after.get((kind, name)))
                 for kind, name in keys if before.get((kind, name)) != after.get((kind, name)))
