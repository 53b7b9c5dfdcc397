"""Elastic jobs through the CI gate (issue 38): a held-out elastic torchrun job passes every
policy and `plan` shows its GPU range; launchers that cannot run elastic are refused, naming
the field. Each through the CLI, as a user runs it."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest
import yaml

from policies import evaluate, rendered_objects
from tests.helpers import stack_doc, write_spec
from trainmaster.api import MAX_MEMBERS_ANNOTATION
from trainmaster.spec import validate_data

# Held out: no stack or other test has this job.
ELASTIC_LLM: dict[str, Any] = {
    "name": "llm-elastic",
    "image": "nvcr.io/nvidia/pytorch:24.05-py3",
    "launcher": "torchrun",
    "nodes": 3,
    "gpusPerPod": 8,
    "command": ["python", "pretrain.py"],
    "checkpoint": {"volume": "checkpoints", "path": "/checkpoints/llm", "intervalMinutes": 5},
    "restartPolicy": {"maxRestarts": 4},
    "elastic": {"minNodes": 2, "maxNodes": 4},
    "queue": "default",
}


def run_cli(*args: str, cwd: Path | None = None) -> subprocess.CompletedProcess[str]:
    return subprocess.run([sys.executable, "-m", "trainmaster", *args], capture_output=True,
                          text=True, timeout=120, cwd=cwd)


def _with_job(job: dict[str, Any]) -> dict[str, Any]:
    doc = stack_doc("dev")
    doc["jobs"].append(dict(job))
    return doc


def test_a_held_out_elastic_torchrun_job_passes_every_policy(tmp_path: Path) -> None:
    path = write_spec(tmp_path / "elastic.yaml", _with_job(ELASTIC_LLM))
    proc = run_cli("policy", "check", str(path))
    assert proc.returncode == 0, proc.stdout + proc.stderr
    assert f"{path}: passes all policies" in proc.stdout


def _gang_findings(change: Any) -> list[str]:
    spec = validate_data(_with_job(ELASTIC_LLM), "elastic.yaml")
    objects = rendered_objects(spec)
    group = next(o for o in objects if o["kind"] == "PodGroup"
                 and o["metadata"]["name"] == "llm-elastic-r0")
    change(group)
    return [f.message for f in evaluate(spec, objects) if f.rule == "training-pod-gang"]


def test_the_gang_rule_still_catches_a_broken_elastic_pod_group() -> None:
    assert _gang_findings(lambda g: None) == []

    def wrong_max(group: dict[str, Any]) -> None:
        group["metadata"]["annotations"][MAX_MEMBERS_ANNOTATION] = "3"

    [message] = _gang_findings(wrong_max)
    assert "the elastic gang has 4 pods" in message and "set it to 4" in message

    def zero_min(group: dict[str, Any]) -> None:
        group["spec"]["minMember"] = 0

    [message] = _gang_findings(zero_min)
    assert "set minMember between 1 and 4" in message

    def not_elastic(group: dict[str, Any]) -> None:  # a rigid gang of 4 starting at 2
        del group["metadata"]["annotations"][MAX_MEMBERS_ANNOTATION]

    [message] = _gang_findings(not_elastic)
    assert "a partial gang could start; set minMember to 4" in message


def test_elastic_is_refused_for_the_deepspeed_launcher(tmp_path: Path) -> None:
    path = write_spec(tmp_path / "elastic.yaml",
                      _with_job({**ELASTIC_LLM, "launcher": "deepspeed"}))
    for command in (("validate",), ("policy", "check")):
        proc = run_cli(*command, str(path))
        assert proc.returncode == 1, proc.stdout + proc.stderr
        out = proc.stdout + proc.stderr
        assert "jobs[3].elastic: launcher 'deepspeed' cannot run elastic" in out
        assert "with launcher torchrun" in out
        assert "Traceback" not in out


@pytest.mark.parametrize("launcher", ["megatron", "python"])
def test_the_other_launchers_run_elastic(tmp_path: Path, launcher: str) -> None:
    # megatron runs under torchrun's elastic agent, python under trainmaster's.
    path = write_spec(tmp_path / "elastic.yaml", _with_job({**ELASTIC_LLM, "launcher": launcher}))
    proc = run_cli("policy", "check", str(path))
    assert proc.returncode == 0, proc.stdout + proc.stderr


def test_plan_shows_an_elastic_job_as_its_gpu_range(tmp_path: Path) -> None:
    env = {**os.environ, "GIT_AUTHOR_NAME": "t", "GIT_AUTHOR_EMAIL": "t@t",
           "GIT_COMMITTER_NAME": "t", "GIT_COMMITTER_EMAIL": "t@t", "GIT_CONFIG_NOSYSTEM": "1"}

    def git(*args: str) -> None:
        subprocess.run(["git", *args], cwd=tmp_path, env=env, check=True, capture_output=True)

    spec = tmp_path / "stacks" / "dev" / "cluster.yaml"
    spec.parent.mkdir(parents=True)
    spec.write_text(yaml.safe_dump(stack_doc("dev"), sort_keys=False))
    git("init", "-q", "-b", "main")
    git("add", "-A")
    git("commit", "-q", "-m", "base")
    spec.write_text(yaml.safe_dump(_with_job(ELASTIC_LLM), sort_keys=False))
    proc = run_cli("plan", "--base", "HEAD", cwd=tmp_path)
    assert proc.returncode == 0, proc.stdout + proc.stderr
    # 2..4 pods of 8 GPUs; the queue's demand counts the job at its most.
    assert "| added | `llm-elastic` | `default` | 16..32 (2..4 \u00d7 8) | |" in proc.stdout
    assert "passes" not in proc.stderr
    proc = run_cli("plan", "--base", "HEAD", "--json", cwd=tmp_path)
    [dev] = yaml.safe_load(proc.stdout)["stacks"]
    [added] = dev["jobs"]["added"]
    assert (added["minGpus"], added["gpus"]) == (16, 32)
    assert added["elastic"] == {"minNodes": 2, "maxNodes": 4}
    default = next(q for q in dev["queues"] if q["name"] == "default")
    assert default["after"] - default["before"] == 32
    assert dev["findings"]["new"] == []
