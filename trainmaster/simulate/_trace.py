"""Read a workload trace: CSV with ``id,submit_s,duration_s,pods,gpus_per_pod`` and,
optionally, ``queue,priority,topology,min_pods,checkpoint_s`` (in that order; a prefix of
them is fine).

``min_pods`` makes a job elastic: it runs on ``min_pods`` to ``pods`` pods (empty: rigid).
``checkpoint_s`` is the job's own checkpoint interval in seconds of run time (0: never;
empty: the run's ``--checkpoint-minutes``).

``topology`` is ``<mode>:<level>``, e.g. ``required:leaf`` or ``preferred:spine``; empty
means the scheduler's default for the gang's size. Every error names the line and the
column and says what would be valid.
"""

from __future__ import annotations

import csv
import math
from collections.abc import Iterable
from pathlib import Path

from trainmaster.scheduler import TopologyConstraint, TopologyMode

from ._jobs import Job, WorkloadError

REQUIRED_COLUMNS = ("id", "submit_s", "duration_s", "pods", "gpus_per_pod")
OPTIONAL_COLUMNS = ("queue", "priority", "topology", "min_pods", "checkpoint_s")


class TraceError(WorkloadError):
    """A trace line or column is invalid."""


def parse_topology(text: str) -> TopologyConstraint:
    """``required:leaf`` -> TopologyConstraint("leaf", REQUIRED). Raises ValueError."""
    mode, sep, level = text.partition(":")
    modes = [m.value for m in TopologyMode]
    if not sep or not level or mode not in modes:
        raise ValueError(f"{text!r} is not <mode>:<level> with mode one of {modes}, "
                         f"e.g. required:leaf or preferred:spine")
    return TopologyConstraint(level, TopologyMode(mode))


def _number(text: str, what: str, *, integer: bool, minimum: float, strict: bool) -> float:
    try:
        value = int(text) if integer else float(text)
    except ValueError:
        kind = "an integer" if integer else "a number"
        raise ValueError(f"{what} must be {kind}, got {text!r}") from None
    if not math.isfinite(value) or value < minimum or (strict and value == minimum):
        bound = f"> {minimum:g}" if strict else f">= {minimum:g}"
        raise ValueError(f"{what} must be {bound}, got {text!r}")
    return value


def parse_trace(lines: Iterable[str], source: str = "<trace>") -> list[Job]:
    """Jobs from CSV text (see module doc), sorted by submit time (stable)."""
    reader = csv.reader(lines)
    header = next(reader, None)
    if header is None:
        raise TraceError(f"{source}: empty file; the first line must be the header "
                         f"{','.join(REQUIRED_COLUMNS)}")
    header = [h.strip() for h in header]
    n = len(header)
    allowed = REQUIRED_COLUMNS + OPTIONAL_COLUMNS
    if n < len(REQUIRED_COLUMNS) or n > len(allowed) or tuple(header) != allowed[:n]:
        raise TraceError(
            f"{source}:1: header is {','.join(header)!r}; it must be "
            f"{','.join(REQUIRED_COLUMNS)} optionally followed by "
            f"{','.join(OPTIONAL_COLUMNS)} (in that order)")
    jobs: list[Job] = []
    seen: dict[str, int] = {}
    for row in reader:
        line = reader.line_num
        if not row or all(not c.strip() for c in row):
            continue
        if len(row) != n:
            raise TraceError(f"{source}:{line}: {len(row)} columns, the header has {n}")
        cells = dict(zip(header, (c.strip() for c in row), strict=True))
        column = "id"
        try:
            if not cells["id"]:
                raise ValueError("id is empty")
            if cells["id"] in seen:
                raise ValueError(f"id {cells['id']!r} already used on line {seen[cells['id']]}")
            column = "submit_s"
            submit = _number(cells[column], column, integer=False, minimum=0, strict=False)
            column = "duration_s"
            duration = _number(cells[column], column, integer=False, minimum=0, strict=True)
            column = "pods"
            pods = int(_number(cells[column], column, integer=True, minimum=1, strict=False))
            column = "gpus_per_pod"
            gpus = int(_number(cells[column], column, integer=True, minimum=1, strict=False))
            queue = cells.get("queue") or "default"
            column = "priority"
            text = cells.get(column) or ""
            priority = (int(_number(text, column, integer=True, minimum=-(2**31),
                                    strict=False)) if text else None)
            column = "topology"
            text = cells.get(column) or ""
            topology = parse_topology(text) if text else None
            column = "min_pods"
            text = cells.get(column) or ""
            least = (int(_number(text, column, integer=True, minimum=1, strict=False))
                     if text else None)
            if least is not None and least > pods:
                raise ValueError(f"min_pods must be <= pods ({pods}), got {least}")
            column = "checkpoint_s"
            text = cells.get(column) or ""
            every = (_number(text, column, integer=False, minimum=0, strict=False)
                     if text else None)
        except ValueError as err:
            raise TraceError(f"{source}:{line}: column {column!r}: {err}") from None
        seen[cells["id"]] = line
        jobs.append(Job(cells["id"], submit, duration, pods, gpus, queue, priority, topology,
                        line, least, every))
    if not jobs:
        raise TraceError(f"{source}: no jobs after the header")
    jobs.sort(key=lambda j: j.submit_s)
    return jobs


def load_trace(path: Path) -> list[Job]:
    try:
        with path.open(newline="") as handle:
            return parse_trace(handle, str(path))
    except OSError as err:
        raise TraceError(f"cannot read trace {path}: {err.strerror or err}") from None
    except UnicodeDecodeError as err:
        raise TraceError(f"{path}: not UTF-8 text ({err.reason})") from None
