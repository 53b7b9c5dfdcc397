"""The arguments trainmaster adds to a job's command, from per-launcher templates
(`jobs[].arguments`, defaults below; docs/spec.md "Launch arguments").

Hyper-parameters are rendered into the launch script. The resume arguments depend on the
attempt's checkpoint, so the gang's pods get them rendered and shell-quoted in
`TRAINMASTER_RESUME_ARGS`, which the launch script reads back into an array.
"""

from __future__ import annotations

import re
import shlex
from dataclasses import dataclass
from pathlib import PurePosixPath

from trainmaster.spec import Job

_STEP = re.compile(r"(\d+)(?:\.[A-Za-z][A-Za-z0-9]*)*$")
_MEGATRON_ITER = re.compile(r"iter_\d+")
_PLACEHOLDER = re.compile(r"\{(\w+)\}")


@dataclass(frozen=True)
class LauncherDefaults:
    hyper_parameter: str
    resume: tuple[str, ...]


DEFAULTS: dict[str, LauncherDefaults] = {
    # A program that parses --resume-from itself (the data-parallel example).
    "python": LauncherDefaults("--{name}={value}", ("--resume-from", "{path}")),
    # The checkpoint as written: a DCP directory or a torch.save file.
    "torchrun": LauncherDefaults("--{name}={value}", ("--resume-from", "{path}")),
    # DeepSpeed's engine.load_checkpoint(load_dir, tag): the root and the tag; with no tag
    # (the checkpoint given is the root) DeepSpeed reads the tag from its `latest` file.
    "deepspeed": LauncherDefaults("--{name}={value}",
                                  ("--load_dir", "{root}", "--ckpt_id", "{tag}")),
    # Megatron-LM's --load takes the root holding latest_checkpointed_iteration.txt, never
    # an iter_N directory.
    "megatron": LauncherDefaults("--{name}={value}", ("--load", "{root}")),
}


def _kebab(name: str) -> str:
    return re.sub(r"(?<!^)(?=[A-Z])", "-", name).lower().replace("_", "-")


def _snake(name: str) -> str:
    return re.sub(r"(?<!^)(?=[A-Z])", "_", name).lower().replace("-", "_")


def hyper_parameter_args(job: Job) -> list[str]:
    template = job.arguments.hyper_parameter
    if template is None:
        template = DEFAULTS[job.launcher].hyper_parameter
    if not template:
        return []
    out: list[str] = []
    for key, value in job.hyper_parameters.items():
        values = {"name": _kebab(key), "key": key, "snake": _snake(key), "value": str(value)}
        out.extend(_fill(word, values) for word in template.split())
    return out


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


def resume_args(job: Job, path: str | None) -> list[str]:
    """The resume arguments of `job` for checkpoint `path` ([] without one)."""
    if not path:
        return []
    template = job.arguments.resume
    words = list(DEFAULTS[job.launcher].resume if template is None else template)
    values = resume_values(job.launcher, path,
                           job.checkpoint.path if job.checkpoint is not None else None)
    out: list[str] = []
    for word in words:
        filled = _fill(word, values)
        if _PLACEHOLDER.search(word) and not filled:
            if out and out[-1].startswith("-") and out[-1] in words:
                out.pop()  # the flag of an empty value goes with it
            continue
        out.append(filled)
    return out


def resume_args_env(job: Job, path: str | None) -> str:
    return shlex.join(resume_args(job, path))


def _fill(word: str, values: dict[str, str]) -> str:
    def one(match: re.Match[str]) -> str:
        name = match.group(1)
        if name not in values:
            raise KeyError(name)
        return values[name]

    return _PLACEHOLDER.sub(one, word)
