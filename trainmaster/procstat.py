"""One process's /proc/<pid>/stat: the one parser of it (state, parent, CPU time).

``comm``, the second field, is in parentheses and may itself hold spaces and ``)``, so
the fields are counted from the last ``)`` (proc(5)); the readers that split on the first
space or ``)`` each got this wrong once somewhere, hence one place for it.
"""

from __future__ import annotations

import os
from pathlib import Path

_STATE = 0
_PPID = 1
_UTIME = 11
_STIME = 12
"""Indexes after ``comm``: state, ppid, utime and stime (fields 3, 4, 14 and 15 of proc(5))."""


def fields(text: str) -> list[str]:
    """The fields after ``comm`` of one stat line (``[0]`` is the state letter)."""
    head, sep, rest = text.rpartition(")")
    after = rest.split()
    if not sep or not head or len(after) <= _STIME:
        raise ValueError(f"not a /proc/<pid>/stat line: {text[:80]!r}")
    return after


def read(pid: int, proc: Path = Path("/proc")) -> list[str] | None:
    """The fields after ``comm`` of ``pid``'s stat; None if the process is gone."""
    try:
        return fields((proc / str(pid) / "stat").read_text())
    except (OSError, ValueError):
        return None


def state(pid: int) -> str | None:
    """``pid``'s state letter (``Z`` zombie, ``T`` stopped, ...); None if it is gone."""
    found = read(pid)
    return None if found is None else found[_STATE]


def parent(pid: int) -> int | None:
    """``pid``'s parent; None if it is gone."""
    found = read(pid)
    return None if found is None else int(found[_PPID])


def cpu_of(text: str, ticks_per_second: int) -> float:
    """utime + stime, in seconds, of one stat line (children it reaped not counted)."""
    after = fields(text)
    return (int(after[_UTIME]) + int(after[_STIME])) / ticks_per_second


def cpu_seconds(pid: int, proc: Path = Path("/proc")) -> float | None:
    """The CPU seconds ``pid`` has used so far (every thread); None if it is gone."""
    try:
        text = (proc / str(pid) / "stat").read_text()
    except OSError:
        return None
    return cpu_of(text, os.sysconf("SC_CLK_TCK"))
