"""Running a build step: its output goes to a log, each line to the progress callback, and
a failure becomes an ImageError that names the step and shows the log's tail."""

from __future__ import annotations

import subprocess
from collections.abc import Callable, Mapping
from pathlib import Path

from trainmaster.image._errors import ImageError

LineFn = Callable[[str], None]


def run_step(
    what: str,
    cmd: list[str],
    log: Path,
    on_line: LineFn | None = None,
    env: Mapping[str, str] | None = None,
    cwd: Path | None = None,
) -> None:
    with log.open("a") as out:
        out.write(f"$ {' '.join(cmd)}\n")
        out.flush()
        proc = subprocess.Popen(
            cmd, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True,
            env=dict(env) if env is not None else None, cwd=cwd,
        )
        assert proc.stdout is not None
        for line in proc.stdout:
            out.write(line)
            if on_line is not None and line.strip():
                on_line(line.rstrip())
        rc = proc.wait()
    if rc != 0:
        tail = "\n".join(log.read_text().splitlines()[-15:])
        raise ImageError(f"{what} failed (exit {rc}); the last lines of {log}:\n{tail}")
