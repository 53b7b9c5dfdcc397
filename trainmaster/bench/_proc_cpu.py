"""CPU seconds of a benchmark's processes (user + system, every thread), from
/proc/<pid>/stat (``trainmaster.procstat``).

Why /proc and not ``ps`` or psutil: two reads per process around a benchmark step, no
dependency, no extra process on the 2 cores being measured. Children that a process
reaped are not counted (``cutime``/``cstime``): the control plane's processes and the
scheduler do their work in their own threads.
"""

from __future__ import annotations

from collections.abc import Mapping
from pathlib import Path

from trainmaster.procstat import cpu_seconds

CpuReading = dict[str, float]
"""CPU seconds by process name (processes that were gone are absent)."""


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
