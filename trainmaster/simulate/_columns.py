"""The figures' labels, units and formats: one list for the table `simulate` prints and
the HTML report, so both say the same thing (definitions in docs/simulate.md).

Each part is (title, caption, columns); a column is (JSON key, label, format). Formats:
``ratio`` (3 decimals), ``s`` (whole seconds), ``h`` (seconds shown as hours, 1
decimal), ``gpuh`` (GPU-hours, 2 decimals), ``int``, ``num`` (as is), ``text``. A missing
figure is ``-``, never ``None``.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

Column = tuple[str, str, str]
Part = tuple[str, str, tuple[Column, ...]]

ALLOCATION_NOTE = (
    "GPU alloc.: allocated GPUs / all GPUs, time-weighted while work waits (some gang "
    "queued) or over the whole run (first submit to last finish); the per-queue columns "
    "use the same two time bases and sum to the policy's.")

POLICY: Part = ("per policy", ALLOCATION_NOTE + " Waits: first start minus submit. "
                "ETTR: GPU-weighted work / time held since first start.", (
    ("policy", "policy", "text"),
    ("gpu_allocation_waiting", "GPU alloc.\nwhile work\nwaits", "ratio"),
    ("gpu_allocation_run", "GPU alloc.\nwhole run", "ratio"),
    ("wait_p50_s", "wait p50\n(s)", "s"),
    ("wait_p95_s", "wait p95\n(s)", "s"),
    ("wait_p95_large_s", "wait p95\n64+ GPUs (s)", "s"),
    ("jct_mean_s", "JCT mean\n(s)", "s"),
    ("gangs_split_beyond_needed", "gangs split\nbeyond needed", "int"),
    ("fragmentation", "fragmen-\ntation", "ratio"),
    ("ettr", "ETTR", "ratio"),
    ("jobs_finished", "jobs\nfinished", "int"),
))

DISRUPTIONS: Part = ("time, preemptions and failures per policy",
                     "GPU-h lost: work since the victims' last checkpoints.", (
    ("policy", "policy", "text"),
    ("span_s", "run\n(h)", "h"),
    ("waiting_s", "work waits\n(h)", "h"),
    ("preemptions", "preemp-\ntions", "int"),
    ("lost_gpu_hours_preemption", "GPU-h lost\nto preemption", "gpuh"),
    ("node_failures", "node\nfailures", "int"),
    ("restarts", "job\nrestarts", "int"),
    ("lost_gpu_hours_failures", "GPU-h lost\nto failures", "gpuh"),
))

QUEUES: Part = ("per queue", ALLOCATION_NOTE, (
    ("policy", "policy", "text"),
    ("queue", "queue", "text"),
    ("nominal_quota", "nominal\nquota", "int"),
    ("jobs", "jobs", "int"),
    ("gpu_allocation_waiting", "GPU alloc.\nwhile work\nwaits", "ratio"),
    ("gpu_allocation_run", "GPU alloc.\nwhole run", "ratio"),
    ("wait_p50_s", "wait p50\n(s)", "s"),
    ("wait_p95_s", "wait p95\n(s)", "s"),
    ("preempted", "pre-\nempted", "int"),
    ("lost_gpu_hours_preemption", "GPU-h lost\nto preemption", "gpuh"),
))

FAIRNESS: Part = ("fair sharing per queue (cohorts of two or more)",
                  "Contended: it and another queue of its cohort had work waiting. "
                  "Entitlement: its weight over those waiting queues' weights; share: its "
                  "part of the GPUs they held (both over the contended time). Owed wait: "
                  "it waited while below its weight's share and another queue was above.", (
    ("policy", "policy", "text"),
    ("queue", "queue", "text"),
    ("weight", "weight", "num"),
    ("entitlement", "entitle-\nment", "ratio"),
    ("share_busy", "share\n(contended)", "ratio"),
    ("contended_s", "contended\n(h)", "h"),
    ("owed_wait_s", "owed wait\n(h)", "h"),
    ("jain_index", "Jain index\n(cohort)", "ratio"),
))

ELASTIC: Part = ("elastic jobs (min_pods) and the others", "", (
    ("policy", "policy", "text"),
    ("jobs", "elastic\njobs", "int"),
    ("jct_mean_s", "their JCT\nmean (s)", "s"),
    ("rigid_jct_mean_s", "other jobs'\nJCT mean (s)", "s"),
    ("rescales", "rescales", "int"),
))

PREEMPTION: Part = ("preemption: the gangs required at a switch level", "", (
    ("policy", "policy", "text"),
    ("lost_gpu_hours", "GPU-h lost\nto preemption", "gpuh"),
    ("required_high_priority_jobs", "top-priority\nrequired jobs", "int"),
    ("required_high_priority_wait_mean_s", "their wait\nmean (s)", "s"),
))


def cell(value: Any, kind: str, signed: bool = False) -> str:
    """One figure as shown; ``signed``: a difference (with its sign)."""
    if value is None:
        return "-"
    if kind == "text":
        return str(value)
    sign = "+" if signed else ""
    if kind == "ratio":
        return f"{value:{sign}.3f}"
    if kind == "s":
        return f"{value:{sign}.0f}"
    if kind == "h":
        return f"{value / 3600:{sign}.1f}"
    if kind == "gpuh":
        return f"{value:{sign}.2f}"
    if kind == "int":
        return f"{int(value):{sign}d}"
    return f"{value:{sign}g}"


def rows(part: Part, results: Sequence[Mapping[str, Any]], signed: bool = False
         ) -> list[list[str]]:
    """The part's rows: one per result, per queue for the queue parts (fairness: only
    queues that have the figures), the elastic and preemption figures of results that have
    them."""
    columns = part[2]
    out = []
    for r in results:
        entries: list[Mapping[str, Any]]
        if part is QUEUES or part is FAIRNESS:
            entries = [{"policy": r["policy"], **q} for q in r.get("queues", [])
                       if part is QUEUES or "entitlement" in q]
        elif part is ELASTIC or part is PREEMPTION:
            key = "elastic" if part is ELASTIC else "preemption"
            entries = [{"policy": r["policy"], **r[key]}] if key in r else []
        else:
            entries = [r]
        for entry in entries:
            out.append([cell(entry.get(key), kind, signed and kind != "text")
                        for key, _, kind in columns])
    return out
