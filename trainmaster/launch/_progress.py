"""What counts as progress: a training step newer than the last one seen.

Two sources, either or both:
- the command's output, matched line by line against a step pattern (`--step-pattern`,
  default STEP_PATTERN, whose first group is the step): `step 1200`, `iteration 1200/50000`
  (Megatron-LM), `global_step=1200`, `Step: 1200`;
- a progress file the command writes (`$TRAINMASTER_PROGRESS_FILE`): its content is the
  step number, rewritten on every step (for quiet programs).
A line of output without a newer step is not progress: a hung job that keeps logging
(a stuck collective printing NCCL warnings) is still hung.
"""

from __future__ import annotations

import re
import threading
import time
from pathlib import Path

STEP_PATTERN = r"""(?i)\b(?:global[_ ]?step|step|iteration|iter)\b['"]?\s*[:=#]?\s*(\d+)"""


def compile_step_pattern(pattern: str) -> re.Pattern[str]:
    """The pattern, checked: it must compile and have a group for the step."""
    try:
        compiled = re.compile(pattern)
    except re.error as exc:
        raise ValueError(f"--step-pattern {pattern!r} is not a regular expression: {exc}; "
                         f"give one whose first group is the step, e.g. {STEP_PATTERN!r}"
                         ) from exc
    if compiled.groups < 1:
        raise ValueError(f"--step-pattern {pattern!r} has no group; put the step in the first "
                         r"group, e.g. 'step (\d+)'")
    return compiled


class Progress:
    """The newest step seen and when it was seen (written by the output forwarders)."""

    def __init__(self, pattern: re.Pattern[str] | None) -> None:
        self.pattern = pattern
        self._lock = threading.Lock()
        self.step = -1
        self.at = 0.0

    def note(self, step: int, when: float | None = None) -> bool:
        """Record `step`; True when it is newer than any before (progress)."""
        with self._lock:
            if step <= self.step:
                return False
            self.step, self.at = step, time.time() if when is None else when
            return True

    def match(self, line: str) -> int | None:
        if self.pattern is None:
            return None
        found = None
        for m in self.pattern.finditer(line):
            if m.group(1) and m.group(1).isdigit():
                found = int(m.group(1))
        if found is not None:
            self.note(found)
        return found

    def read_file(self, path: Path) -> None:
        """The step in the progress file, if it holds a newer one (stamped with its mtime)."""
        try:
            text = path.read_text().strip()
            mtime = path.stat().st_mtime
        except (OSError, UnicodeDecodeError):
            return
        if text.isdigit():
            self.note(int(text), mtime)


class LineFeed:
    """One output stream's bytes, in any chunking, matched a whole line at a time (stdout
    and stderr each get one: their lines interleave)."""

    def __init__(self, progress: Progress) -> None:
        self.progress = progress
        self._partial = b""

    def feed(self, chunk: bytes) -> None:
        if self.progress.pattern is None:
            return
        lines = (self._partial + chunk).split(b"\n")
        self._partial = lines.pop()[-4096:]  # a line without its end is matched once it ends
        for line in lines:
            self.progress.match(line.decode("utf-8", "replace"))
