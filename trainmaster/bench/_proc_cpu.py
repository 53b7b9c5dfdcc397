"""CPU seconds a process has used (user + system, every thread), from /proc/<pid>/stat.

Why /proc and not ``ps`` or psutil: two reads per process around a benchmark step, no
dependency, no extra process on the 2 cores being measured. Children that a process
reaped are not counted (``cutime``/``cstime``): the control plane's processes and the
scheduler do their work in their own threads.
"""

from __future__ import annotations

import os
from collections.abc import Mapping
from pathlib import Path

CpuReading = dict[str, float]
"""CPU seconds by process name (processes that were gone are absent)."""

_UTIME = 11
_STIME = 12
"""Indexes of utime and stime (fields 14 and 15 of proc(5)) after the ``comm`` field."""


def parse_stat(text: str, ticks_per_second: int) -> float:
    """utime + stime, in seconds, of one /proc/<pid>/stat line.

    ``comm`` (the second field) is in parentheses and may hold spaces and ``)``, so the
    fields are counted from the last ``)``."""
    head, sep, rest = text.rpartition(")")
    fields = rest.split()
    if not sep or not head or len(fields) <= _STIME:
        raise ValueError(f"not a /proc/<pid>/stat line: {text[:80]!r}")
    return (int(fields[_UTIME]) + int(fields[_STIME])) / ticks_per_second


def cpu_seconds(pid: int, proc: Path = Path("/proc")) -> float | None:
    """The CPU seconds ``pid`` has used so far; None if it is gone."""
    try:
        text = (proc / str(pid) / "stat").read_text()
    except OSError:
        return None
    return parse_stat(text, os.sysconf("SC_CLK_TCK"))


def read_cpu(pids: Mapping[str, int], proc: Path = Path("/proc")) -> CpuReading:
    """CPU seconds of each named process that is still there."""
    reading: CpuReading = {}
    for name, pid in pids.items():
        used = cpu_seconds(pid, proc)
        if used is not None:
            reading[name] = used
    return reading


def cpu_used(before: CpuReading, after: CpuReading) -> CpuReading:
    """Seconds used between two readings, by process (only those in both)."""
    return {name: round(after[name] - before[name], 2)
            for name in sorted(after) if name in before}
