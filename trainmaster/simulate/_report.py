"""``--report DIR``: three matplotlib PNGs and one HTML page that shows them with the table,
in the look of `trainmaster ui` (its templates, its stylesheet copied beside the page).

* ``allocation.png``: allocated GPUs / all GPUs over virtual time, per policy;
* ``wait_cdf.png``: waiting-time CDF per policy, one panel per job-size class;
* ``fragmentation.png``: the share of free GPUs the queue's head cannot use, over time.
"""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

from ._jobs import WorkloadError
from ._run import SimulationResult

MAX_POINTS = 4000
SIZE_CLASSES: tuple[tuple[str, int, int], ...] = (
    ("1-8 GPUs", 1, 8), ("9-63 GPUs", 9, 63), ("64-511 GPUs", 64, 511),
    ("512+ GPUs", 512, 1 << 62),
)  # fmt: skip


def _thin(times: Sequence[float], values: Sequence[float]) -> tuple[list[float], list[float]]:
    """At most MAX_POINTS samples, each the value holding at the start of its step."""
    step = max(1, math.ceil(len(times) / MAX_POINTS))
    return [t / 3600 for t in times[::step]], list(values[::step])


def _cdf(values: Sequence[float]) -> tuple[list[float], list[float]]:
    ordered = sorted(values)
    n = len(ordered)
    step = max(1, math.ceil(n / MAX_POINTS))
    xs = [*ordered[::step], ordered[-1]]
    ys = [i / n for i in range(0, n, step)] + [1.0]
    return xs, ys


def write_report(result: SimulationResult, directory: Path, title: str,
                 compared: Mapping[str, Any] | None = None) -> Path:
    """Write the PNGs and ``index.html`` into ``directory``; return the page's path.
    ``compared``: the JSON's ``compare`` object (``--compare``), whose results and
    difference the page shows after the base's tables (the plots are the base's)."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    try:
        directory.mkdir(parents=True, exist_ok=True)
    except OSError as err:
        raise WorkloadError(f"cannot create --report {directory}: {err.strerror or err}") from None
    runs = result.results

    fig, ax = plt.subplots(figsize=(10, 4))
    for r in runs:
        ax.step(*_thin(r.series.time, r.series.allocation), where="post", label=r.policy, lw=0.8)
    ax.set(xlabel="virtual time (h)", ylabel="allocated GPUs / all GPUs", ylim=(0, 1.02),
           title="GPU allocation over time")
    ax.legend()
    fig.tight_layout()
    fig.savefig(directory / "allocation.png", dpi=110)
    plt.close(fig)

    fig, axes = plt.subplots(1, len(SIZE_CLASSES), figsize=(14, 3.6), sharey=True)
    for ax, (label, lo, hi) in zip(axes, SIZE_CLASSES, strict=True):
        for r in runs:
            waits = [max(w, 0.0) / 60 for w, g in zip(r.waits, r.job_gpus, strict=True)
                     if lo <= g <= hi]
            if waits:
                ax.step(*_cdf(waits), where="post", label=r.policy, lw=0.9)
        ax.set(title=label, xlabel="wait (min, log)")
        ax.set_xscale("symlog", linthresh=1)
        ax.set_xlim(left=0)
    axes[0].set_ylabel("share of jobs")
    for ax in axes:  # the first size class with jobs in it carries the legend
        if ax.get_legend_handles_labels()[0]:
            ax.legend()
            break
    fig.suptitle("Waiting-time CDF by job size")
    fig.tight_layout()
    fig.savefig(directory / "wait_cdf.png", dpi=110)
    plt.close(fig)

    fig, ax = plt.subplots(figsize=(10, 4))
    for r in runs:
        ax.step(*_thin(r.series.time, r.series.fragmentation), where="post", label=r.policy,
                lw=0.8)
    ax.set(xlabel="virtual time (h)", ylabel="free GPUs the head cannot use", ylim=(0, 1.02),
           title="Fragmentation over time (gaps: nothing waits)")
    ax.legend()
    fig.tight_layout()
    fig.savefig(directory / "fragmentation.png", dpi=110)
    plt.close(fig)

    return _page(result, directory, title, compared)


def _page(result: SimulationResult, directory: Path, title: str,
          compared: Mapping[str, Any] | None) -> Path:
    """``index.html`` in the look of `trainmaster ui` (its templates and stylesheet): the
    tables `simulate` prints, with the same labels, every cell formatted (``_columns``)."""
    from trainmaster.ui import write_page

    from ._columns import DISRUPTIONS, ELASTIC, FAIRNESS, POLICY, QUEUES, rows

    sides: list[tuple[str, str, Sequence[Mapping[str, Any]], bool]] = [
        ("", "", [r.to_json() for r in result.results], False)]
    if compared is not None:
        change = str(compared["change"])
        sides = [("", " (base)", sides[0][2], False),
                 ("-changed", f" ({change})", compared["results"], False),
                 ("-difference", f" (difference: {change} minus base)",
                  compared["difference"], True)]
    tables = []
    for id_suffix, title_suffix, results, signed in sides:
        for key, part in (("policies", POLICY), ("disruptions", DISRUPTIONS),
                          ("queues", QUEUES), ("fairness", FAIRNESS), ("elastic", ELASTIC)):
            body = rows(part, results, signed)
            if body:
                name, caption, columns = part
                tables.append({"id": key + id_suffix,
                               "title": name[0].upper() + name[1:] + title_suffix,
                               "caption": caption if not id_suffix else "",
                               "heads": [label.replace("-\n", "").replace("\n", " ")
                                         for _, label, _ in columns],
                               "rows": body})
    return write_page(directory, "report.html", title, nodes=result.nodes, gpus=result.gpus,
                      jobs=result.jobs, wall_seconds=result.wall_seconds, tables=tables)
