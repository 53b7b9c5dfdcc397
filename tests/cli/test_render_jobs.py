"""`trainmaster render --jobs` through the installed CLI: each job's TrainingJob and first
gang, the very objects `policy check` judges (spec_objects) and the operator applies
(build_gang); tests/operator/test_render_jobs_live.py compares them with what the operator
really creates on the control plane."""

from __future__ import annotations

from pathlib import Path

import yaml

from tests.cli.entry import assert_one_error_line, run
from tests.helpers import STACKS
from trainmaster.objects import build_gang, build_training_job, spec_objects
from trainmaster.spec import load_spec

SPEC = STACKS / "dev" / "cluster.yaml"


def _documents(text: str) -> list[dict[str, object]]:
    return [d for d in yaml.safe_load_all(text) if d is not None]


def test_every_job_gets_its_training_job_and_first_gang_as_the_operator_builds_it() -> None:
    proc = run("render", str(SPEC), "--jobs")
    assert proc.returncode == 0, proc.stderr
    spec = load_spec(SPEC)
    expected = [o for job in spec.jobs
                for o in (build_training_job(spec, job), *build_gang(spec, job, 0))]
    assert _documents(proc.stdout) == expected
    kinds = [d["kind"] for d in _documents(proc.stdout)[:9]]
    assert kinds == ["TrainingJob", "ServiceAccount", "Role", "RoleBinding", "NetworkPolicy",
                     "Service", "ConfigMap", "PodGroup", "Job"]
    # What policy check judges for the jobs is this, object for object.
    judged = spec_objects(spec)
    for obj in expected[1:]:
        if obj["kind"] != "TrainingJob":
            assert obj in judged, (obj["kind"], obj["metadata"]["name"])


def test_one_job_with_its_summary_launch_script_and_environment() -> None:
    proc = run("render", str(SPEC), "--job", "gpt-small")
    assert proc.returncode == 0, proc.stderr
    out = proc.stdout
    assert out.startswith("---\n# job gpt-small: gang gpt-small-r0, 2 pods x 8 GPUs, "
                          "launcher torchrun\n# queue research, the queue's priority "
                          "(PriorityClass dev-research), topology required leaf\n")
    docs = _documents(out)
    assert {d["metadata"]["name"] for d in docs} >= {"gpt-small", "gpt-small-r0",
                                                     "gpt-small-launch"}
    assert all(d["metadata"]["labels"]["trainmaster.io/job"] == "gpt-small"
               for d in docs if d["kind"] != "ServiceAccount" and d["kind"] != "Role"
               and d["kind"] != "RoleBinding")
    # The launch script reads as a script (a literal block), not one escaped line.
    assert "  launch.sh: |\n    #!/usr/bin/env bash\n" in out
    job = next(d for d in docs if d["kind"] == "Job")
    env = {e["name"]: e.get("value") for e in
           job["spec"]["template"]["spec"]["containers"][0]["env"]}
    assert env["NCCL_IB_HCA"] and env["WORLD_SIZE"] == "16"
    assert env["MASTER_ADDR"] == "gpt-small-r0-0.gpt-small.trainmaster.svc"


def test_bad_job_names_and_a_folder_are_usage_errors(tmp_path: Path) -> None:
    line = assert_one_error_line(run("render", str(SPEC), "--job", "nope"), 2)
    assert "--job nope: the spec has no such job (jobs: gpt-small, bert-finetune, " \
        "dp-example)" in line
    line = assert_one_error_line(
        run("render", str(SPEC), "--jobs", "--output-dir", str(tmp_path)), 2)
    assert "--jobs prints one YAML stream" in line
    out = tmp_path / "jobs.yaml"
    proc = run("render", str(SPEC), "--job", "dp-example", "-o", str(out))
    assert proc.returncode == 0 and f"wrote {out}" in proc.stderr
    assert _documents(out.read_text())[0]["kind"] == "TrainingJob"
