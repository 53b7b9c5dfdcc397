"""Convert public job logs to the simulator's trace CSV (column mapping: docs/simulate.md).

* ``helios``: SenseTime Helios ``cluster_log.csv`` (S-Lab-System-Group/HeliosData):
  ``job_id,user,vc,gpu_num,cpu_num,node_num,state,submit_time,start_time,end_time,
  duration,queue``, times as ``YYYY-MM-DD HH:MM:SS``.
* ``philly``: Microsoft Philly ``cluster_job_log`` (msr-fiddle/philly-traces): one JSON
  array of jobs with ``jobid``, ``vc``, ``submitted_time`` and ``attempts`` (each with
  ``start_time``, ``end_time`` and ``detail``: one entry per machine with its ``gpus``).

Jobs without GPUs or without a positive run time are skipped and counted (CPU jobs, jobs
cancelled before they ran). Submit times become seconds after the first submission.
"""

from __future__ import annotations

import csv
import json
import math
from collections import Counter
from collections.abc import Callable, Iterable, Iterator
from dataclasses import dataclass, field
from datetime import datetime
from pathlib import Path
from typing import Any, TextIO

from ._trace import REQUIRED_COLUMNS, TraceError

TIME_FORMAT = "%Y-%m-%d %H:%M:%S"
HELIOS_COLUMNS = ("job_id", "vc", "gpu_num", "node_num", "submit_time", "duration")


@dataclass(slots=True)
class Row:
    id: str
    submit: datetime
    duration: float
    pods: int
    gpus_per_pod: int
    queue: str


@dataclass(slots=True)
class Conversion:
    written: int = 0
    skipped: Counter[str] = field(default_factory=Counter)


def _time(text: object, where: str) -> datetime:
    try:
        return datetime.strptime(str(text).strip(), TIME_FORMAT)
    except ValueError:
        raise TraceError(f"{where}: {text!r} is not a time like 2020-06-09 18:41:01") from None


def shape(gpus: int, machines: int) -> tuple[int, int]:
    """(pods, GPUs per pod): one pod per machine when the GPUs divide evenly, else one
    pod per GPU (the trace does not say how they were spread)."""
    if machines >= 1 and gpus % machines == 0:
        return machines, gpus // machines
    return gpus, 1


def helios_rows(handle: TextIO, source: str, skipped: Counter[str]) -> Iterator[Row]:
    reader = csv.DictReader(handle)
    missing = [c for c in HELIOS_COLUMNS if c not in (reader.fieldnames or [])]
    if missing:
        raise TraceError(f"{source}:1: not a Helios cluster_log.csv: no column "
                         f"{', '.join(missing)} (expected {', '.join(HELIOS_COLUMNS)}, ...)")
    for row in reader:
        where = f"{source}:{reader.line_num}"
        try:
            gpus = int(row["gpu_num"] or 0)
            machines = int(row["node_num"] or 1)
            duration = float(row["duration"] or 0)
        except ValueError as err:
            raise TraceError(f"{where}: gpu_num, node_num and duration must be numbers "
                             f"({err})") from None
        if gpus <= 0:
            skipped["no GPUs"] += 1
            continue
        if duration <= 0:
            skipped["did not run"] += 1
            continue
        pods, per_pod = shape(gpus, machines)
        yield Row(row["job_id"], _time(row["submit_time"], f"{where}: submit_time"), duration,
                  pods, per_pod, row["vc"] or "default")


def philly_rows(handle: TextIO, source: str, skipped: Counter[str]) -> Iterator[Row]:
    try:
        jobs: Any = json.load(handle)
    except json.JSONDecodeError as err:
        raise TraceError(f"{source}:{err.lineno}: not Philly's cluster_job_log JSON "
                         f"({err.msg})") from None
    if not isinstance(jobs, list):
        raise TraceError(f"{source}: not Philly's cluster_job_log: expected a JSON array of jobs")
    for n, job in enumerate(jobs):
        where = f"{source}: job #{n}"
        if not isinstance(job, dict) or "jobid" not in job or "submitted_time" not in job:
            raise TraceError(f"{where}: a job needs jobid, submitted_time and attempts")
        attempts = [a for a in job.get("attempts") or []
                    if a.get("start_time") not in (None, "None")
                    and a.get("end_time") not in (None, "None")]
        if not attempts:
            skipped["did not run"] += 1
            continue
        detail = attempts[0].get("detail") or []
        per_machine = [len(d.get("gpus") or []) for d in detail]
        gpus = sum(per_machine)
        if gpus <= 0:
            skipped["no GPUs"] += 1
            continue
        duration = sum((_time(a["end_time"], f"{where} end_time")
                        - _time(a["start_time"], f"{where} start_time")).total_seconds()
                       for a in attempts)
        if duration <= 0:
            skipped["did not run"] += 1
            continue
        even = len(set(per_machine)) == 1
        pods, per_pod = (len(per_machine), per_machine[0]) if even else (gpus, 1)
        yield Row(str(job["jobid"]), _time(job["submitted_time"], f"{where} submitted_time"),
                  duration, pods, per_pod, str(job.get("vc") or "default"))


Reader = Callable[[TextIO, str, Counter[str]], Iterable[Row]]
CONVERTERS: dict[str, Reader] = {"helios": helios_rows, "philly": philly_rows}


def convert_trace(kind: str, source: Path, target: Path) -> Conversion:
    """Read ``source`` in format ``kind``, write the simulator's CSV to ``target``."""
    if kind not in CONVERTERS:
        raise TraceError(f"unknown trace format {kind!r}; use one of {', '.join(CONVERTERS)}")
    result = Conversion()
    try:
        with source.open(newline="") as handle:
            rows = list(CONVERTERS[kind](handle, str(source), result.skipped))
    except OSError as err:
        raise TraceError(f"cannot read {source}: {err.strerror or err}") from None
    if not rows:
        raise TraceError(f"{source}: no job with GPUs and a run time to convert")
    rows.sort(key=lambda r: r.submit)
    origin = rows[0].submit
    try:
        with target.open("w", newline="") as out:
            writer = csv.writer(out)
            writer.writerow((*REQUIRED_COLUMNS, "queue"))
            for r in rows:
                submit = (r.submit - origin).total_seconds()
                writer.writerow((r.id, f"{submit:g}", f"{math.ceil(r.duration)}", r.pods,
                                 r.gpus_per_pod, r.queue))
                result.written += 1
    except OSError as err:
        raise TraceError(f"cannot write {target}: {err.strerror or err}") from None
    return result
