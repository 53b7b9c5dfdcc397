"""The effective training time ratio (ETTR) of a soak, from the job's own step log.

Read from rank 0's log lines (every pod's, every attempt's, merged in time order):

- a *step line* says a step finished: `step N loss …` (the torch example's rank 0) or
  `rank 0 step N loss …` (the numpy example's);
- a *run start* is rank 0 (re)starting: `rank 0 of W: pid …` (torch), `rank 0/W: joined
  the gang` (numpy), `rank 0: resumed from … at step N` (both). A step that is not above
  the one before it also starts a run (its start line was missed).

A step's time is the time since the previous step line of its run; the first step of a run
has no such line (before it the run loaded, resumed and met its peers: recovery, not
training), so it is given its run's median step time. A step *counts toward progress*
when no later step line (up to the soak's end) has a step number at or below it: steps
logged before a fault and redone after the resume do not count, their redone copies do.
Productive time is the sum of the counted steps' times, clipped to the soak's window, and

    ETTR = productive time / wall time of the soak.

Per fault (the last one's read after the window if it ends before the job trains again):
`recover_seconds` is the fault -> the first step line of the first run started after it
(if none started before the next fault, the first step line after the fault: the job did
not stop); `steps_lost` is the highest step logged before that run started minus
the step that run resumed at (its first step - 1).
"""

from __future__ import annotations

import itertools
import re
import statistics
from collections.abc import Iterable
from dataclasses import dataclass
from typing import Any

from trainmaster.drill._logs import LogLine

STEP_LINE = re.compile(r"^(?:rank 0 )?step (\d+) loss ")
RUN_START = re.compile(r"^rank 0(?: of \d+: pid |/\d+: joined the gang|: resumed from )")


@dataclass(frozen=True)
class Mark:
    time: float
    step: int | None
    """The step that finished; None: a run starts."""


@dataclass(frozen=True)
class Fault:
    kind: str
    at: float
    """Unix time the fault was injected."""
    node: str = ""
    what: str = ""


@dataclass(frozen=True)
class FaultCost:
    fault: Fault
    recover_seconds: float | None
    """None: no step was logged after the fault before the soak ended."""
    steps_lost: int
    resumed_step: int | None
    restarted: bool
    """A new run started after the fault (False: training went on through it)."""

    def row(self) -> dict[str, Any]:
        return {"kind": self.fault.kind, "node": self.fault.node,
                "recover_seconds": (None if self.recover_seconds is None
                                    else round(self.recover_seconds, 1)),
                "steps_lost": self.steps_lost, "resumed_step": self.resumed_step,
                "restarted": self.restarted}


@dataclass(frozen=True)
class Accounting:
    start: float
    end: float
    productive_seconds: float
    steps_counted: int
    last_step: int
    runs: int
    monotone: bool
    """Within every run the steps rise one by one (no step skipped or repeated)."""
    faults: tuple[FaultCost, ...]

    @property
    def wall_seconds(self) -> float:
        return self.end - self.start

    @property
    def ettr(self) -> float:
        return self.productive_seconds / self.wall_seconds if self.wall_seconds > 0 else 0.0


def progress_marks(lines: Iterable[LogLine]) -> list[Mark]:
    """Rank 0's step lines and run starts, in time order."""
    marks = []
    for line in lines:
        if m := STEP_LINE.match(line.text):
            marks.append(Mark(line.time, int(m.group(1))))
        elif RUN_START.match(line.text):
            marks.append(Mark(line.time, None))
    return sorted(marks, key=lambda m: (m.time, m.step is not None))


def split_runs(marks: list[Mark]) -> list[tuple[float, list[Mark]]]:
    """(start time, step marks) of each run that logged a step."""
    runs: list[tuple[float, list[Mark]]] = []
    started: float | None = None
    current: list[Mark] = []
    for mark in marks:
        if mark.step is None or (current and current[-1].step is not None
                                 and mark.step <= current[-1].step):
            if current:
                runs.append((current[0].time if started is None else started, current))
            current = []
            started = mark.time
            if mark.step is None:
                continue
        current.append(mark)
    if current:
        runs.append((current[0].time if started is None else started, current))
    return runs


def _step_times(runs: list[tuple[float, list[Mark]]]) -> list[tuple[Mark, float]]:
    gaps = [b.time - a.time for _, steps in runs for a, b in itertools.pairwise(steps)]
    overall = statistics.median(gaps) if gaps else 0.0
    out = []
    for _, steps in runs:
        own = [b.time - a.time for a, b in itertools.pairwise(steps)]
        first = statistics.median(own) if own else overall
        out.append((steps[0], first))
        out += [(b, b.time - a.time) for a, b in itertools.pairwise(steps)]
    return out


def account(marks: list[Mark], faults: list[Fault], start: float, end: float) -> Accounting:
    """The module docstring's accounting of the window [start, end]."""
    runs = split_runs([m for m in marks if m.time <= end])
    timed = _step_times(runs)
    productive, counted = 0.0, 0
    lowest_later = float("inf")
    for mark, seconds in sorted(timed, key=lambda t: t[0].time, reverse=True):
        assert mark.step is not None
        if mark.step < lowest_later and mark.time >= start:
            inside = min(mark.time, end) - max(mark.time - seconds, start)
            productive += max(0.0, inside)
            counted += 1
        lowest_later = min(lowest_later, mark.step)
    monotone = all(a.step is not None and b.step == a.step + 1
                   for _, steps in runs for a, b in itertools.pairwise(steps))
    last = max((m.step for _, steps in runs for m in steps if m.step is not None), default=0)
    ordered = sorted(faults, key=lambda f: f.at)
    # A fault's cost may be seen after the window (the soak waits for its last fault).
    every_run = split_runs(marks)
    costs = tuple(_cost(f, ordered[i + 1].at if i + 1 < len(ordered) else float("inf"),
                        every_run) for i, f in enumerate(ordered))
    return Accounting(start, end, productive, counted, last,
                      sum(1 for s, _ in runs if s >= start), monotone, costs)


def _cost(fault: Fault, next_at: float, runs: list[tuple[float, list[Mark]]]) -> FaultCost:
    after = [(s, steps) for s, steps in runs if s > fault.at]
    if after and after[0][0] < next_at:
        started, steps = after[0]
        first = steps[0]
        assert first.step is not None
        before = [m.step for _, ss in runs for m in ss
                  if m.time < started and m.step is not None]
        resumed = first.step - 1
        lost = max(0, max(before, default=resumed) - resumed)
        return FaultCost(fault, first.time - fault.at, lost, resumed, True)
    later = [m for _, ss in runs for m in ss if m.time > fault.at]
    if later and later[0].time < next_at:
        return FaultCost(fault, later[0].time - fault.at, 0, None, False)
    return FaultCost(fault, None, 0, None, False)
