"""Before and after in one run: the same measurement from another source tree.

Why: on a machine shared with other work, two figures taken minutes apart differ by more
than the change being judged. So the code under test and an older checkout (a ``git
worktree`` of the commit before a change) run in turns, in the same invocation, and see
the same load. The other tree's code runs in a child process with ``PYTHONPATH`` on it
and ``-P`` (no current directory on ``sys.path``), under this interpreter and its
installed dependencies; so does this tree's, so both pay the same process start.
"""

from __future__ import annotations

import json
import os
import statistics
import subprocess
import sys
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from trainmaster.bench._errors import BenchError

PLACEMENT_FIELDS = ("cold_ms", "warm_ms", "node_event_ms", "cold_cpu_ms", "warm_cpu_ms",
                    "node_event_cpu_ms")
"""What `bench placement --also-tree` compares (medians of each run, ms)."""

_PLACEMENT = ("import json, sys\n"
              "from trainmaster.bench import placement_at_scale\n"
              "print(json.dumps(placement_at_scale(**json.loads(sys.argv[1])).to_json()))\n")


def this_tree() -> Path:
    """The source tree this process runs from (the folder holding ``trainmaster/``)."""
    import trainmaster

    return Path(trainmaster.__file__).resolve().parents[1]


def checked_tree(tree: Path) -> Path:
    """``tree`` if it holds a trainmaster package; else a clear error."""
    tree = tree.expanduser().resolve()
    if not (tree / "trainmaster" / "__init__.py").is_file():
        raise BenchError(f"--also-tree {tree}: no trainmaster/__init__.py there; give a "
                         "checkout of this repository, e.g. `git worktree add --detach "
                         "/tmp/before <commit>`")
    return tree


def tree_env(tree: Path) -> dict[str, str]:
    return {**os.environ, "PYTHONPATH": str(tree)}


def python_argv() -> list[str]:
    """This interpreter without the current directory on ``sys.path`` (``-P``), so that
    ``PYTHONPATH`` alone decides which tree's ``trainmaster`` is imported."""
    return [sys.executable, "-P"]


def placement_in(tree: Path, arguments: dict[str, Any]) -> dict[str, Any]:
    """``placement_at_scale(**arguments)`` run by ``tree``'s code; its JSON."""
    proc = subprocess.run([*python_argv(), "-c", _PLACEMENT, json.dumps(arguments)],
                          capture_output=True, text=True, env=tree_env(tree), check=False)
    if proc.returncode != 0:
        raise BenchError(f"the placement bench of {tree} failed (exit {proc.returncode}): "
                         f"{proc.stderr.strip().splitlines()[-1:] or ''}")
    result: dict[str, Any] = json.loads(proc.stdout)
    return result


@dataclass(frozen=True, slots=True)
class Compared:
    field: str
    before: tuple[float, ...]
    after: tuple[float, ...]

    @property
    def ratio(self) -> float:
        """After's median over before's: 1.05 is 5% slower."""
        before = statistics.median(self.before)
        return statistics.median(self.after) / before if before else float("nan")

    def to_json(self) -> dict[str, Any]:
        return {"field": self.field, "before": list(self.before), "after": list(self.after),
                "before_median": statistics.median(self.before),
                "after_median": statistics.median(self.after),
                "ratio": round(self.ratio, 3)}


def placement_before_after(tree: Path, rounds: int,
                           arguments: dict[str, Any]) -> list[Compared]:
    """``rounds`` runs from each tree, alternating (after first in even rounds, before
    first in odd ones, so neither always runs on a cooler or warmer machine)."""
    before_tree, after_tree = checked_tree(tree), this_tree()
    runs: dict[str, list[dict[str, Any]]] = {"before": [], "after": []}
    for round_ in range(rounds):
        order = ("after", "before") if round_ % 2 == 0 else ("before", "after")
        for side in order:
            source = before_tree if side == "before" else after_tree
            runs[side].append(placement_in(source, arguments))
    return [Compared(name, tuple(float(r[name]) for r in runs["before"]),
                     tuple(float(r[name]) for r in runs["after"]))
            for name in PLACEMENT_FIELDS]
