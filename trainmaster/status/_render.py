"""How `trainmaster status` prints a ResourceView (rich tables on the console given: the
CLI's is unbounded when stdout is not a terminal, so a pipe gets every number whole)."""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from trainmaster.status._fairness import percent, resource_lines, share_text

if TYPE_CHECKING:
    from rich.console import Console
    from rich.table import Table

    from trainmaster.status._view import ResourceView


def age(seconds: float) -> str:
    seconds = int(seconds)
    if seconds < 120:
        return f"{seconds}s"
    minutes = seconds // 60
    if minutes < 120:
        return f"{minutes}m"
    hours = minutes // 60
    if hours < 48:
        return f"{hours}h{minutes % 60:02d}m" if hours < 10 else f"{hours}h"
    return f"{hours // 24}d"


def fairness_table(report: dict[str, Any]) -> Table:
    """The cohort tree with each node's DRF share against its entitlement
    (``FairReport.to_json``)."""
    from rich.table import Table

    on = "on" if report.get("fair_sharing") else "off"
    table = Table(title=f"Queue fair sharing (fair sharing {on}; share: weighted DRF share "
                  "as the scheduler computes it; entitlement: weight over its cohort's)")
    for col in ("queue / cohort", "weight", "share", "entitlement", "held",
                "used/nominal (cpu in cores, memory in Gi)"):
        table.add_column(col, justify="left" if col[0] in "qu" else "right")
    for node in report.get("nodes") or []:
        name = "  " * node["depth"] + (f"[b]{node['name']}[/]" if node["kind"] == "cohort"
                                       else node["name"])
        table.add_row(name, f"{node['weight']:g}", share_text(node),
                      percent(node["entitlement"]), percent(node["held"]),
                      "\n".join(resource_lines(node)) or "-")
    return table


def render_view(view: ResourceView, console: Console) -> None:
    from rich.table import Table

    gpus = Table(title="GPUs by switch")
    for col in ("switch", "level", "nodes", "usable", "GPUs", "used", "free", "fenced"):
        gpus.add_column(col, justify="left" if col in ("switch", "level") else "right")
    depth = {level: i for i, level in enumerate(view.levels)}
    for s in view.switches:
        gpus.add_row("  " * depth[s.level] + s.switch, s.level, str(s.nodes), str(s.usable),
                     str(s.gpus), str(s.used), str(s.free),
                     f"[red]{s.fenced}[/]" if s.fenced else "0")
    console.print(gpus)
    if view.queues:
        queues = Table(title=f"Queues (GPUs, from the {view.queues_from})")
        for col in ("queue", "in use", "nominal quota", "borrowed", "cohort"):
            queues.add_column(col, justify="left" if col in ("queue", "cohort") else "right")
        for q in view.queues:
            quota = "unlimited" if q.nominal_quota is None else str(q.nominal_quota)
            borrowed = f"[yellow]{q.borrowed}[/]" if q.borrowed else "0"
            queues.add_row(q.name, str(q.in_use), quota, borrowed, q.cohort or "-")
        console.print(queues)
        if view.gpus_outside_queues:
            why = ("pods the scheduler has not charged to a queue (on nodes outside its "
                   "partition, or bound since it last published)"
                   if view.queues_from == "scheduler ledger" else
                   "pods outside any known queue (no kueue.x-k8s.io/queue-name label, or a "
                   "queue the scheduler's config does not list)")
            console.print(
                f"{view.gpus_outside_queues} of the {view.gpus_used} GPUs in use belong to "
                f"{why}, so the switches' use is higher than the queues' sum.",
                highlight=False)
    if view.fairness:
        console.print(fairness_table(view.fairness))
    jobs = Table(title="Training jobs")
    numbers = ("restarts", "nodes", "step", "steps/s", "since checkpoint", "age")
    for col in ("job", "phase", "restarts", "nodes", "step", "steps/s", "last checkpoint",
                "since checkpoint", "age"):
        jobs.add_column(col, justify="right" if col in numbers else "left")
    colors = {"Running": "green", "Failed": "red", "Restarting": "yellow",
              "Succeeded": "blue", "Suspended": "magenta"}
    for j in view.jobs:
        ckpt = f"{j.checkpoint} (step {j.step})" if j.checkpoint and j.step is not None \
            else (j.checkpoint or "-")
        color = colors.get(j.phase, "white")
        jobs.add_row(f"{j.namespace}/{j.name}", f"[{color}]{j.phase}[/]", str(j.restarts),
                     str(j.nodes), "-" if j.current_step is None else str(j.current_step),
                     "-" if j.step_rate is None else f"{j.step_rate:.2f}", ckpt,
                     "-" if j.checkpoint_age is None else age(j.checkpoint_age),
                     age(j.age_seconds))
    console.print(jobs)
    if view.progress_note:
        console.print(view.progress_note, highlight=False)
    if view.fenced:
        fenced = Table(title="Fenced nodes")
        for col in ("node", "switch", "reason", "since"):
            fenced.add_column(col)
        for f in view.fenced:
            fenced.add_row(f.name, f.switch or "-", f.reason, f.since or "-")
        console.print(fenced)
    else:
        console.print("no fenced nodes")
    print_caches(console, view)
    if view.pending:
        pending = Table(title=f"Pending gangs ({len(view.pending)})")
        # The scheduler's words (its reason; its quota answer on its published ledger).
        for col in ("namespace", "job", "gang", "queue", "pods", "reason", "quota"):
            pending.add_column(col, justify="right" if col == "pods" else "left")
        for p in view.pending:
            pods = p.size or ("-" if p.pods is None else str(p.pods))
            quota = f"{p.quota} ({p.would_start})" if p.quota and p.would_start \
                else p.quota or "-"
            pending.add_row(p.namespace, p.job, p.gang or "-", p.queue or "-", pods,
                            p.reason, quota)
        console.print(pending)
    else:
        console.print("no pending gangs")


CACHE_ROWS = 20
"""Nodes listed per dataset (not ready first); `--json` has every node."""


def print_caches(console: Console, view: ResourceView) -> None:
    """Each dataset's nodes per cache state, and the nodes that are not ready, with why."""
    from rich.table import Table

    if not view.caches:
        return
    table = Table(title="Dataset cache")
    for col in ("dataset", "ready", "warming", "failed", "evicted", "not ready (node: why)"):
        table.add_column(col, justify="right" if col in ("ready", "warming", "failed",
                                                         "evicted") else "left")
    for cache in view.caches:
        colder = [r for r in cache.nodes if r.state != "ready"]
        shown = [f"{r.node}: {r.state}" + (f" ({r.reason})" if r.reason else "")
                 for r in colder[:CACHE_ROWS]]
        if len(colder) > CACHE_ROWS:
            shown.append(f"... {len(colder) - CACHE_ROWS} more (--json)")
        failed = cache.counts.get("failed", 0)
        table.add_row(cache.dataset, str(cache.counts.get("ready", 0)),
                      str(cache.counts.get("warming", 0)),
                      f"[red]{failed}[/]" if failed else "0",
                      str(cache.counts.get("evicted", 0)), "\n".join(shown) or "-")
    console.print(table)
