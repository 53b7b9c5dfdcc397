"""Per-launcher arguments: the resume checkpoint in the form each framework loads it (the
checkpoint as the launcher's watcher finds it on disk), and hyper-parameters by template."""

from __future__ import annotations

import subprocess
from pathlib import Path
from typing import Any

import pytest

from tests.helpers import stack_doc
from trainmaster.launch import CheckpointWatcher
from trainmaster.objects._launch_args import hyper_parameter_args, resume_args, resume_values
from trainmaster.spec import Job, SpecError, load_spec_text


def _job(launcher: str, **fields: Any) -> Job:
    return Job.model_validate({"name": "gpt", "image": "img:1", "launcher": launcher,
                               "nodes": 2, **fields})


def _found(directory: Path) -> str:
    found = CheckpointWatcher(directory, settle_seconds=3600).poll()
    assert found is not None
    return str(found.path)


def test_torchrun_resumes_from_a_dcp_directory(tmp_path: Path) -> None:
    """DCP writes its shards, then `.metadata` last: that completes the checkpoint."""
    (tmp_path / "checkpoint-1200").mkdir()
    (tmp_path / "checkpoint-1200" / "__0_0.distcp").write_bytes(b"x")
    assert CheckpointWatcher(tmp_path, settle_seconds=3600).poll() is None
    (tmp_path / "checkpoint-1200" / ".metadata").write_bytes(b"m")
    path = _found(tmp_path)
    assert resume_args(_job("torchrun"), path) == ["--resume-from", str(tmp_path /
                                                                          "checkpoint-1200")]


def test_torchrun_resumes_from_a_torch_save_file(tmp_path: Path) -> None:
    (tmp_path / "step_800.pt").write_bytes(b"x")
    (tmp_path / "step_900.pt.tmp").write_bytes(b"x")  # still being written
    found = CheckpointWatcher(tmp_path, settle_seconds=0.0)
    assert found.poll() is None  # first look: not yet seen unchanged
    hit = found.poll()
    assert hit is not None and hit.step == 800
    assert resume_args(_job("torchrun"), str(hit.path)) == ["--resume-from",
                                                            str(tmp_path / "step_800.pt")]


def test_deepspeed_resumes_from_the_root_with_the_tag(tmp_path: Path) -> None:
    (tmp_path / "global_step1200").mkdir()
    (tmp_path / "global_step1200" / "mp_rank_00_model_states.pt").write_bytes(b"x")
    (tmp_path / "latest").write_text("global_step1200")
    path = _found(tmp_path)
    assert resume_args(_job("deepspeed"), path) == [
        "--load_dir", str(tmp_path), "--ckpt_id", "global_step1200"]


def test_deepspeed_given_the_root_reads_latest_itself(tmp_path: Path) -> None:
    """No tag: the --ckpt_id flag goes with it, and DeepSpeed reads its `latest` file."""
    job = _job("deepspeed", checkpoint={"volume": "ckpt", "path": str(tmp_path)})
    assert resume_args(job, f"{tmp_path}/") == ["--load_dir", str(tmp_path)]
    assert resume_args(_job("deepspeed"), "/ckpt/run") == ["--load_dir", "/ckpt/run"]
    # An entry of the checkpoint directory is a tag, whatever its name.
    assert resume_args(job, f"{tmp_path}/best") == ["--load_dir", str(tmp_path),
                                                    "--ckpt_id", "best"]


def test_megatron_loads_the_root_holding_the_tracker_file(tmp_path: Path) -> None:
    (tmp_path / "iter_0001200").mkdir()
    (tmp_path / "iter_0001200" / "mp_rank_00").mkdir()
    (tmp_path / "latest_checkpointed_iteration.txt").write_text("1200")
    path = _found(tmp_path)
    assert path == str(tmp_path / "iter_0001200")
    assert resume_args(_job("megatron"), path) == ["--load", str(tmp_path)]
    assert resume_values("megatron", path)["step"] == "1200"
    # Given the root already, it stays the root.
    assert resume_args(_job("megatron"), str(tmp_path)) == ["--load", str(tmp_path)]


def test_a_template_picks_other_words() -> None:
    job = _job("megatron", arguments={"resume": ["--load", "{root}", "--ckpt-step", "{step}"]})
    assert resume_args(job, "/ckpt/iter_0000500") == ["--load", "/ckpt", "--ckpt-step", "500"]
    quiet = _job("torchrun", arguments={"resume": []})
    assert resume_args(quiet, "/ckpt/step-5") == []
    assert resume_args(_job("torchrun"), None) == []


def test_hyper_parameters_by_template() -> None:
    hp = {"hyperParameters": {"trainSteps": 200, "learningRate": 0.1}}
    assert hyper_parameter_args(_job("python", **hp)) == ["--train-steps=200",
                                                         "--learning-rate=0.1"]
    snake = _job("deepspeed", **hp, arguments={"hyperParameter": "--{snake} {value}"})
    assert hyper_parameter_args(snake) == ["--train_steps", "200", "--learning_rate", "0.1"]
    assert hyper_parameter_args(_job("torchrun", **hp, arguments={"hyperParameter": ""})) == []


def test_an_unknown_placeholder_names_the_field_and_the_fix() -> None:
    import yaml

    doc = stack_doc("dev")
    doc["jobs"][0]["arguments"] = {"resume": ["--load", "{dir}"]}
    with pytest.raises(SpecError) as err:
        load_spec_text(yaml.safe_dump(doc), "dev.yaml")
    assert "arguments.resume" in str(err.value) and "{root}" in str(err.value)


@pytest.mark.parametrize(("launcher", "expect"), [
    ("torchrun", ["--resume-from", "/ck pt/step-5"]),
    ("deepspeed", ["--load_dir", "/ck pt", "--ckpt_id", "step-5"]),
    ("python", ["--resume-from", "/ck pt/step-5"]),
])
def test_the_launch_script_reads_the_quoted_args_back(tmp_path: Path, launcher: str,
                                                     expect: list[str]) -> None:
    """The gang env carries the rendered args shell-quoted; bash gets the same words."""
    from trainmaster.objects._launch_args import resume_args_env

    quoted = resume_args_env(_job(launcher), "/ck pt/step-5")
    script = 'eval "RESUME_ARGS=(${TRAINMASTER_RESUME_ARGS})"; printf "%s\\n" "${RESUME_ARGS[@]}"'
    out = subprocess.run(["bash", "-c", script], env={"TRAINMASTER_RESUME_ARGS": quoted},
                         capture_output=True, text=True, check=True).stdout
    assert out.splitlines() == expect


def test_the_gang_brings_the_launcher_and_serves_metrics() -> None:
    """Any training image gets the launcher: an init container in the trainmaster image
    writes the bundle into an emptyDir the trainer mounts; the trainer has a `metrics`
    port and the rendered resume arguments."""
    import yaml

    from trainmaster.launch import METRICS_PORT
    from trainmaster.objects import build_gang_job, render_launch_script

    spec = load_spec_text(yaml.safe_dump(stack_doc("dev")), "dev.yaml")
    job = spec.job("gpt-small")
    pod = build_gang_job(spec, job, 2, "/checkpoints/gpt-small/step-1000")["spec"]["template"]
    init = pod["spec"]["initContainers"][0]
    assert init["image"] == spec.image.reference
    assert init["command"] == ["trainmaster", "launch-bundle", "/opt/trainmaster-launch"]
    trainer = pod["spec"]["containers"][0]
    assert trainer["image"] == job.image
    assert {"name": "launcher", "mountPath": "/opt/trainmaster-launch", "readOnly": True} in \
        trainer["volumeMounts"]
    assert {"name": "launcher", "emptyDir": {"sizeLimit": "64Mi"}} in pod["spec"]["volumes"]
    assert trainer["ports"] == [{"name": "metrics", "containerPort": METRICS_PORT}]
    env = {e["name"]: e.get("value") for e in trainer["env"]}
    assert env["TRAINMASTER_RESUME_ARGS"] == "--resume-from /checkpoints/gpt-small/step-1000"
    assert env["TRAINMASTER_METRICS_PORT"] == str(METRICS_PORT)
    script = render_launch_script(job)
    assert "/opt/trainmaster-launch/trainmaster-launch.pyz" in script
    assert "--learning-rate=0.0003" in script and "--resume-from" not in script


def test_the_gang_carries_the_resume_template_and_its_job_uid() -> None:
    """The launcher renders the resume arguments again for a newer checkpoint it finds at
    start-up (trainmaster.launch._resume); its ranks agree under the attempt's Job uid."""
    import shlex

    import yaml

    from trainmaster.launch._resume import render_resume_args
    from trainmaster.objects import build_gang_job

    spec = load_spec_text(yaml.safe_dump(stack_doc("dev")), "dev.yaml")
    job = spec.job("gpt-small")
    trainer = build_gang_job(spec, job, 2, "/checkpoints/gpt-small/step-1000"
                             )["spec"]["template"]["spec"]["containers"][0]
    env = {e["name"]: e for e in trainer["env"]}
    template = shlex.split(env["TRAINMASTER_RESUME_TEMPLATE"]["value"])
    assert template == ["--resume-from", "{path}"]
    newer = "/checkpoints/gpt-small/step-1200"
    assert render_resume_args(template, job.launcher, newer, "/checkpoints/gpt-small") == \
        resume_args(job, newer)
    assert env["TRAINMASTER_GANG_UID"]["valueFrom"] == {"fieldRef": {
        "fieldPath": "metadata.labels['batch.kubernetes.io/controller-uid']"}}
