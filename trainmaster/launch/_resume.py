"""Which checkpoint a starting gang resumes from: the operator's choice
($TRAINMASTER_RESUME_FROM, the newest checkpoint *reported* when it created the gang) or a
newer one that is complete in the checkpoint directory (a dying gang, e.g. on a node that
went NotReady, may finish one without being able to report it).

Every rank of a gang must resume from the same checkpoint, yet ranks start at different
moments and a checkpoint may complete in between. So the first rank to start decides and
publishes its choice in the checkpoint directory as `.trainmaster-resume-<gang>`: it
writes a private file and hard-links it to that name, which fails if the name exists
(atomic on local filesystems and NFS alike), so exactly one choice is ever published and
it is whole when it appears. Every later rank reads it instead of looking itself. <gang>
is the attempt's Job uid ($TRAINMASTER_GANG_UID from the pod's `controller-uid` label),
so a TrainingJob created again under the same name never reads an old gang's choice.

The look happens only in gang pods built with a resume template
($TRAINMASTER_RESUME_TEMPLATE) whose command ends with the resume arguments the launch
script appended; the arguments are then rendered again for the chosen checkpoint.
Standard library only: this runs in the launcher bundle.
"""

from __future__ import annotations

import json
import os
import re
import secrets
import shlex
import sys
import time
from collections.abc import Mapping
from dataclasses import dataclass, field
from pathlib import Path, PurePosixPath

from trainmaster.api import (
    GANG_UID_ENV,
    JOB_ENV,
    RESTART_ENV,
    RESUME_ARGS_ENV,
    RESUME_FROM_ENV,
    RESUME_TEMPLATE_ENV,
)
from trainmaster.launch._checkpoints import newest_complete, step_of

GANG_ENV = GANG_UID_ENV
DECISION_PREFIX = ".trainmaster-resume-"
STALE_DECISION_SECONDS = 600.0
"""Other gangs' decision files older than this are removed by the next deciding rank."""

_STEP = re.compile(r"(\d+)(?:\.[A-Za-z][A-Za-z0-9]*)*$")
_MEGATRON_ITER = re.compile(r"iter_\d+")
_PLACEHOLDER = re.compile(r"\{(\w+)\}")


def resume_values(launcher: str, path: str, checkpoint_dir: str | None = None
                  ) -> dict[str, str]:
    """{path, root, tag, step} of a checkpoint path, as the launcher's loader wants them.

    The path is one entry of the job's checkpoint directory (what the launcher reports) or
    that directory itself (a root, for DeepSpeed and Megatron to read their pointer file);
    outside it, the name decides: Megatron's entries are iter_N, others end in a step."""
    clean = path.rstrip("/") or path
    entry = PurePosixPath(clean)
    match = _STEP.search(entry.name)
    root_dir = PurePosixPath(checkpoint_dir.rstrip("/") or "/") if checkpoint_dir else None
    if root_dir is not None and entry == root_dir:
        stepped = False
    elif root_dir is not None and entry.parent == root_dir:
        stepped = True
    elif launcher == "megatron":
        stepped = bool(_MEGATRON_ITER.fullmatch(entry.name))
    else:
        stepped = match is not None and not entry.name.startswith(".")
    root = str(entry.parent) if stepped else clean
    return {
        "path": clean,
        "root": root,
        "tag": entry.name if stepped else "",
        "step": str(int(match.group(1))) if match and stepped else "",
    }


def fill(word: str, values: Mapping[str, str]) -> str:
    def one(match: re.Match[str]) -> str:
        name = match.group(1)
        if name not in values:
            raise KeyError(name)
        return values[name]

    return _PLACEHOLDER.sub(one, word)


def render_resume_args(words: list[str], launcher: str, path: str | None,
                       checkpoint_dir: str | None) -> list[str]:
    """The resume template `words` filled for checkpoint `path` ([] without one)."""
    if not path:
        return []
    values = resume_values(launcher, path, checkpoint_dir)
    out: list[str] = []
    for word in words:
        filled = fill(word, values)
        if _PLACEHOLDER.search(word) and not filled:
            if out and out[-1].startswith("-") and out[-1] in words:
                out.pop()  # the flag of an empty value goes with it
            continue
        out.append(filled)
    return out


@dataclass(frozen=True)
class Decision:
    """The checkpoint the gang resumes from ("" = the start) and who chose it."""

    path: str
    step: int | None
    by_this_rank: bool


def _entry_step(path: str, directory: Path) -> int | None:
    """The step of `path` if it is an entry of `directory` (a root has none)."""
    clean = PurePosixPath(path.rstrip("/") or path)
    if clean.parent != PurePosixPath(str(directory).rstrip("/") or "/"):
        return None
    return step_of(clean.name)


def choose(directory: Path, resume_from: str) -> tuple[str, int | None]:
    """The newest complete checkpoint of `directory` if it is newer than `resume_from`
    (or there is none), else `resume_from`. A `resume_from` whose step is unknown (the
    directory itself, for DeepSpeed or Megatron to read their pointer) is kept."""
    current = _entry_step(resume_from, directory) if resume_from else None
    found = newest_complete(directory)
    if found is not None and (not resume_from or (current is not None and found.step > current)):
        return str(PurePosixPath(directory) / found.path.name), found.step
    return resume_from, current


def decision_file(directory: Path, gang: str) -> Path:
    return directory / (DECISION_PREFIX + re.sub(r"[^A-Za-z0-9_.-]", "_", gang))


def _read(final: Path, wait_seconds: float) -> dict[str, object] | None:
    """The published decision; a rank that lost the race to a filesystem without hard
    links (O_EXCL fallback) may see it before it is written, so it waits a little."""
    deadline = time.monotonic() + wait_seconds
    while True:
        try:
            text = final.read_text()
            if text.endswith("\n"):
                value = json.loads(text)
                if isinstance(value, dict):
                    return value
        except (OSError, ValueError):
            pass
        if time.monotonic() >= deadline:
            return None
        time.sleep(0.1)


def _publish(final: Path, body: str) -> bool:
    """Create `final` holding `body` unless it exists; True if this call created it."""
    private = final.with_name(f"{final.name}.{os.uname().nodename}.{os.getpid()}."
                              f"{secrets.token_hex(4)}.tmp")
    with open(private, "w") as out:
        out.write(body)
        out.flush()
        os.fsync(out.fileno())
    try:
        os.link(private, final)
        return True
    except FileExistsError:
        return False
    except OSError:  # no hard links here: exclusive create, readers wait for the newline
        try:
            fd = os.open(final, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o644)
        except FileExistsError:
            return False
        with os.fdopen(fd, "w") as out:
            out.write(body)
        return True
    finally:
        private.unlink(missing_ok=True)


def _remove_stale(directory: Path, keep: Path, now: float) -> None:
    try:
        entries = list(directory.glob(DECISION_PREFIX + "*"))
    except OSError:
        return
    for entry in entries:
        try:
            if entry != keep and now - entry.stat().st_mtime > STALE_DECISION_SECONDS:
                entry.unlink()
        except OSError:
            pass


def agree(directory: Path, gang: str, resume_from: str, wait_seconds: float = 10.0
          ) -> Decision:
    """The gang's one decision: published by the first rank, read by all others. Raises
    OSError when the directory cannot hold it (missing, read-only)."""
    final = decision_file(directory, gang)
    published = _read(final, 0) if final.exists() else None
    mine = False
    if published is None:
        path, step = choose(directory, resume_from)
        mine = _publish(final, json.dumps({"path": path, "step": step}) + "\n")
        if mine:
            _remove_stale(directory, final, time.time())
            return Decision(path, step, True)
        published = _read(final, wait_seconds)
    if published is None:
        raise OSError(f"{final} holds no decision")
    chosen = published.get("step")
    return Decision(str(published.get("path") or ""),
                    chosen if isinstance(chosen, int) else None, mine)


@dataclass(frozen=True)
class Start:
    """What the launcher starts: the command and its environment, perhaps resuming from a
    newer checkpoint than the operator's (then `resumed` is it, with its step)."""

    command: list[str]
    env: dict[str, str]
    resumed: tuple[str, int | None] | None = None
    notes: list[str] = field(default_factory=list)


def plan_start(command: list[str], env: Mapping[str, str], checkpoint_dir: Path | None,
               launcher: str = "") -> Start:
    """The command and environment to start, resuming from the gang's decision."""
    start = Start(list(command), dict(env))
    template = env.get(RESUME_TEMPLATE_ENV)
    if checkpoint_dir is None or template is None:
        return start  # not a gang pod built for it (or no checkpoints): as given
    resume_from = env.get(RESUME_FROM_ENV, "")
    # The launch script appends the resume arguments only when there is a checkpoint.
    old = shlex.split(env.get(RESUME_ARGS_ENV, "")) if resume_from else []
    if old and command[-len(old):] != old:
        start.notes.append("the command does not end with $TRAINMASTER_RESUME_ARGS; "
                           f"resuming from {resume_from or 'the start'} as given")
        return start
    gang = env.get(GANG_ENV) or f"{env.get(JOB_ENV, '')}-r" \
                                 f"{env.get(RESTART_ENV, '')}"
    try:
        decision = agree(checkpoint_dir, gang, resume_from)
    except OSError as exc:
        start.notes.append(f"cannot agree on a checkpoint in {checkpoint_dir} ({exc}); "
                           f"resuming from {resume_from or 'the start'} as given")
        return start
    if decision.path == resume_from:
        return start
    new = render_resume_args(shlex.split(template), launcher, decision.path,
                             str(checkpoint_dir))
    head = command[:len(command) - len(old)] if old else list(command)
    source = "this rank found" if decision.by_this_rank else "the gang's first rank found"
    note = (f"resuming from {decision.path} (step {decision.step}): {source} it complete "
            f"in {checkpoint_dir}, newer than $TRAINMASTER_RESUME_FROM "
            f"({resume_from or 'none'})")
    return Start([*head, *new],
                 {**env, RESUME_FROM_ENV: decision.path, RESUME_ARGS_ENV: shlex.join(new)},
                 (decision.path, decision.step), [note])


def print_notes(start: Start) -> None:
    for note in start.notes:
        print(f"trainmaster launch: {note}", file=sys.stderr, flush=True)
