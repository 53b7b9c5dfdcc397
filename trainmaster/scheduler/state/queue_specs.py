"""Queue and cohort settings as the scheduler's config file writes them (Kueue's names),
and their parsing: ``QueueSpec``, ``CohortSpec``, ``FairSharing``.

Quantities of ``resources`` entries are read by a ``Units`` function (the runtime's
``base_units``: cpu in millicores, memory in bytes; whole numbers by default).
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass, field

from ..framework.model import GPU
from .fair_share import STRATEGIES, FairSharing
from .quota_tree import ResourceQuota


@dataclass(frozen=True, slots=True)
class QueueSpec:
    name: str
    nominal_quota: int | None = None
    """GPUs the queue may hold at once without borrowing; ``None`` is unlimited."""
    borrowing_limit: int | None = None
    """GPUs beyond ``nominal_quota`` it may borrow from its cohort; ``None`` is no limit."""
    cohort: str | None = None
    """Queues of one cohort lend each other their idle nominal quota."""
    preemption: bool = True
    """False: the queue's gangs never preempt (whatever their PriorityClass says)."""
    lending_limit: int | None = None
    """GPUs of ``nominal_quota`` it lends its cohort; ``None``: all it leaves idle."""
    resources: Mapping[str, ResourceQuota] = field(default_factory=dict)
    """Quotas of other resources (cpu in millicores, memory in bytes, rdma/...)."""
    weight: float = 1.0
    """``fairSharing.weight``."""

    @property
    def quotas(self) -> dict[str, ResourceQuota]:
        """Every resource's quota, the GPU fields included."""
        out = dict(self.resources)
        if self.nominal_quota is not None:
            out[GPU] = ResourceQuota(self.nominal_quota, self.borrowing_limit,
                                     self.lending_limit)
        return out

    @property
    def limited(self) -> bool:
        return self.nominal_quota is not None or bool(self.resources)

    @property
    def can_borrow(self) -> bool:
        return self.cohort is not None and self.nominal_quota is not None and (
            self.borrowing_limit is None or self.borrowing_limit > 0
        )


@dataclass(frozen=True, slots=True)
class CohortSpec:
    """A cohort with a parent, quota and fair-sharing weight (Kueue's Cohort)."""

    name: str
    parent: str | None = None
    resources: Mapping[str, ResourceQuota] = field(default_factory=dict)
    weight: float = 1.0


Units = Callable[[str, object], int]
"""(resource, quantity as written) -> base units; the runtime passes its ``base_units``."""


def plain_units(resource: str, value: object) -> int:
    """Whole numbers only (GPUs and devices; a config written in base units)."""
    return int(str(value))


def _quotas(raw: object, where: str, units: Units) -> dict[str, ResourceQuota]:
    if raw is None:
        return {}
    if not isinstance(raw, list):
        raise ValueError(f"{where}.resources must be a list of {{name, nominalQuota, ...}}")
    out = {}
    for item in raw:
        if not isinstance(item, Mapping) or "name" not in item:
            raise ValueError(f"{where}.resources entries need a name")
        name = str(item["name"])

        def _qty(key: str, item: Mapping[str, object] = item, name: str = name) -> int | None:
            value = item.get(key)
            return None if value is None else units(name, value)

        out[name] = ResourceQuota(_qty("nominalQuota") or 0, _qty("borrowingLimit"),
                                  _qty("lendingLimit"))
    return out


def _weight(entry: Mapping[str, object]) -> float:
    fair = entry.get("fairSharing")
    if isinstance(fair, Mapping) and fair.get("weight") is not None:
        return float(str(fair["weight"]))
    return 1.0


def queue_specs(raw: Iterable[Mapping[str, object]],
                units: Units = plain_units) -> list[QueueSpec]:
    """Queue entries of the scheduler config (camelCase keys) as ``QueueSpec``."""
    out = []
    for entry in raw:
        def _int(key: str, entry: Mapping[str, object] = entry) -> int | None:
            value = entry.get(key)
            return None if value is None else int(str(value))

        nominal = _int("nominalQuota")
        if nominal is None:
            nominal = _int("gpuQuota")
        cohort = entry.get("cohort")
        resources = _quotas(entry.get("resources"), f"queues[{entry['name']}]", units)
        gpu = resources.pop(GPU, None)
        out.append(
            QueueSpec(
                name=str(entry["name"]),
                nominal_quota=gpu.nominal if gpu is not None else nominal,
                borrowing_limit=gpu.borrowing_limit if gpu is not None
                else _int("borrowingLimit"),
                cohort=None if cohort is None else str(cohort),
                preemption=bool(entry.get("preemption", True)),
                lending_limit=gpu.lending_limit if gpu is not None else _int("lendingLimit"),
                resources=resources,
                weight=_weight(entry),
            )
        )
    return out


def cohort_specs(raw: Iterable[Mapping[str, object]],
                 units: Units = plain_units) -> list[CohortSpec]:
    """Cohort entries of the scheduler config (``name``, ``parent``, ``resources``,
    ``fairSharing``) as ``CohortSpec``."""
    out = []
    for entry in raw:
        parent = entry.get("parent")
        out.append(CohortSpec(str(entry["name"]), None if parent is None else str(parent),
                              _quotas(entry.get("resources"), f"cohorts[{entry['name']}]",
                                      units),
                              _weight(entry)))
    return out


def fair_sharing(raw: Mapping[str, object] | None,
                 admission: Mapping[str, object] | None = None) -> FairSharing:
    """The config's ``fairSharing`` ({enable, preemptionStrategies}) and
    ``admissionFairSharing`` ({usageHalfLifeSeconds})."""
    raw = raw or {}
    strategies = raw.get("preemptionStrategies")
    half_life = (admission or {}).get("usageHalfLifeSeconds")
    return FairSharing(
        enable=bool(raw.get("enable", False)),
        preemption_strategies=STRATEGIES if strategies is None
        else tuple(str(s) for s in strategies) if isinstance(strategies, list)
        else (str(strategies),),
        usage_half_life=None if half_life is None else float(str(half_life)),
    )
