"""``--jobs-out FILE.csv``: one row per job and run, in the order of the workload.

Columns: ``run`` (``base``, or the ``--compare`` change), ``policy``, then ``JobRow``'s:
name, queue, submit, first start and end (seconds of the run's clock), wait, preemptions
and the GPU-seconds of work they cost, node failures that stopped it and their cost, its
pods and GPUs, and the distinct nodes of its latest placement.
"""

from __future__ import annotations

import csv
from collections.abc import Sequence
from pathlib import Path

from ._jobs import WorkloadError
from ._metrics import JobRow
from ._run import SimulationResult


def write_jobs(path: Path, runs: Sequence[tuple[str, SimulationResult]]) -> int:
    """Write the rows of every (run label, result); return how many were written."""
    written = 0
    try:
        with path.open("w", newline="") as handle:
            out = csv.writer(handle)
            out.writerow(("run", "policy", *JobRow.HEADER))
            for label, result in runs:
                for policy in result.results:
                    for row in policy.job_rows:
                        out.writerow((label, policy.policy, *row.cells()))
                        written += 1
    except OSError as err:
        raise WorkloadError(f"cannot write --jobs-out {path}: {err.strerror or err}") from None
    return written
