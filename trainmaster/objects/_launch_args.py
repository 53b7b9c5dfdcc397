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

# Rendering lives with the launcher, which renders again for a checkpoint it finds.
from trainmaster.launch import fill, render_resume_args
from trainmaster.launch import resume_values as resume_values
from trainmaster.spec import Job


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
        out.extend(fill(word, values) for word in template.split())
    return out


def resume_template(job: Job) -> list[str]:
    template = job.arguments.resume
    return list(DEFAULTS[job.launcher].resume if template is None else template)


def resume_args(job: Job, path: str | None) -> list[str]:
    """The resume arguments of `job` for checkpoint `path` ([] without one)."""
    return render_resume_args(resume_template(job), job.launcher, path,
                              job.checkpoint.path if job.checkpoint is not None else None)


def resume_args_env(job: Job, path: str | None) -> str:
    return shlex.join(resume_args(job, path))


def resume_template_env(job: Job) -> str:
    """The template itself, for the launcher to render again for a newer checkpoint it
    finds complete at start-up (trainmaster.launch._resume)."""
    return shlex.join(resume_template(job))
