"""The queues' fair sharing as `trainmaster status` and the web view show it: the
scheduler's own arithmetic (``trainmaster.scheduler.fair_report`` over a ledger built
from the scheduler's config and charged with what each queue holds), never a second
implementation.

What each queue holds comes from the ledger the scheduler publishes (every resource, in
base units) or, without one, from its bound pods by label (``queue_usage``).
"""

from __future__ import annotations

from collections import defaultdict
from collections.abc import Iterable, Mapping
from typing import TYPE_CHECKING, Any

import yaml

from trainmaster.api import QUEUE_LABEL, QUEUE_LEDGER_KEY

if TYPE_CHECKING:
    from trainmaster.scheduler import SchedulerConfig

Usage = dict[str, dict[str, int]]
"""queue -> resource -> base units (devices, millicores, bytes)."""


def scheduler_configs(configmaps: Iterable[Mapping[str, Any]]) -> list[dict[str, Any]]:
    """Every trainmaster-scheduler config document (``config.yaml``) of these maps."""
    out = []
    for cm in configmaps:
        text = (cm.get("data") or {}).get("config.yaml")
        try:
            doc = yaml.safe_load(text) if text else None
        except yaml.YAMLError:
            continue
        if isinstance(doc, dict):
            out.append(doc)
    return out


def ledger_usage(ledger: Iterable[Mapping[str, Any]]) -> Usage:
    """What each queue holds, per resource, from the scheduler's published entries."""
    out: Usage = {}
    for entry in ledger:
        name = str(entry.get("name") or "")
        if not name:
            continue
        held = out.setdefault(name, {})
        for flavor in entry.get("flavorsUsage") or []:
            for res in (flavor or {}).get("resources") or []:
                try:
                    total = int((res or {}).get("total") or 0)
                except (TypeError, ValueError):
                    continue
                if res.get("name") and total:
                    held[str(res["name"])] = held.get(str(res["name"]), 0) + total
    return out


def queue_usage(pods: Iterable[Mapping[str, Any]]) -> Usage:
    """What each queue's bound, unfinished pods request (label
    ``kueue.x-k8s.io/queue-name``), per resource in the scheduler's base units."""
    from trainmaster.scheduler import pod_requests

    out: dict[str, dict[str, int]] = defaultdict(dict)
    for pod in pods:
        queue = ((pod.get("metadata") or {}).get("labels") or {}).get(QUEUE_LABEL)
        spec = pod.get("spec") or {}
        if not queue or not spec.get("nodeName") \
                or (pod.get("status") or {}).get("phase") in ("Succeeded", "Failed"):
            continue
        held = out[queue]
        for resource, qty in pod_requests(spec).items():
            if qty:
                held[resource] = held.get(resource, 0) + qty
    return dict(out)


def quantity(resource: str, qty: float) -> str:
    """Base units as people read them: cpu in cores, memory in Gi, others as counted."""
    if resource == "cpu":
        return f"{qty / 1000:g}"
    if resource == "memory":
        return f"{qty / 2**30:.4g}Gi"
    return f"{qty:g}"


def share_text(node: dict[str, Any]) -> str:
    """A node's DRF share as the scheduler compares it (inf: borrowing at weight 0)."""
    if node.get("share_infinite"):
        return "inf"
    return f"{node['share']:.3f}"


def percent(value: float | None) -> str:
    return "-" if value is None else f"{100 * value:.0f}%"


def resource_lines(node: dict[str, Any]) -> list[str]:
    """Per resource: used/nominal, and what is borrowed or lent."""
    lines = []
    for r in node.get("resources") or []:
        name = r["name"]
        text = f"{name} {quantity(name, r['used'])}/{quantity(name, r['nominal'])}"
        if r["borrowed"]:
            text += f" borrowed {quantity(name, r['borrowed'])}"
        if r["lent"]:
            text += f" lent {quantity(name, r['lent'])}"
        lines.append(text)
    return lines


def queue_fairness(configs: Iterable[Mapping[str, Any]],
                   ledger: Iterable[Mapping[str, Any]] | None,
                   pods: Iterable[Mapping[str, Any]]) -> dict[str, Any] | None:
    """``fairness`` on what the scheduler published (``ledger``), else on ``pods`` by
    label: what `trainmaster status` and the web view both show."""
    usage = ledger_usage(ledger) if ledger is not None else queue_usage(pods)
    return fairness(configs, usage)


def ledger_entries(configmaps: Iterable[Mapping[str, Any]]) -> list[dict[str, Any]] | None:
    """The queue entries of every published queue ledger among ``configmaps`` (key
    ``QUEUE_LEDGER_KEY``); None when none is published."""
    out: list[dict[str, Any]] = []
    found = False
    for cm in configmaps:
        text = (cm.get("data") or {}).get(QUEUE_LEDGER_KEY)
        try:
            doc = yaml.safe_load(text) if text else None
        except yaml.YAMLError:
            continue
        if isinstance(doc, dict) and isinstance(doc.get("queues"), list):
            found = True
            out.extend(q for q in doc["queues"] if isinstance(q, dict))
    return out if found else None


def fairness(configs: Iterable[Mapping[str, Any]], usage: Mapping[str, Mapping[str, int]],
             ) -> dict[str, Any] | None:
    """The fair-sharing report (``FairReport.to_json``) of a scheduler config with
    queues that have a quota, charged with ``usage``: of several (several schedulers),
    the one whose queues hold most of ``usage``'s queues, then the first; None when there
    is none (or it does not parse: the scheduler would not have started with it)."""
    from trainmaster.scheduler import charged_ledger, fair_report

    config = pick_config(configs, usage)
    if config is None:
        return None
    ledger = charged_ledger(config.queues, config.cohorts, config.fair_sharing,
                            {q: dict(a) for q, a in usage.items() if q in
                             {s.name for s in config.queues}})
    return fair_report(ledger).to_json()


def pick_config(configs: Iterable[Mapping[str, Any]], usage: Mapping[str, Mapping[str, int]],
                ) -> SchedulerConfig | None:
    """Of several scheduler configs (several schedulers), the one with quotas whose
    queues hold most of ``usage``'s queues, then the first; None when there is none (or
    it does not parse: the scheduler would not have started with it)."""
    from trainmaster.scheduler import ConfigError, SchedulerConfig

    def overlap(doc: Mapping[str, Any]) -> int:
        names = {str(q.get("name")) for q in doc.get("queues") or [] if isinstance(q, dict)}
        return -len(names & set(usage))

    for doc in sorted(configs, key=overlap):
        try:
            config = SchedulerConfig.from_mapping(doc)
        except (ConfigError, TypeError, ValueError):
            continue
        if any(q.limited for q in config.queues):
            return config
    return None
