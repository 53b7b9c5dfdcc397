"""The `launcher: python` launch script, as rendered for the dev stack's dp-example and run
by bash the way each gang pod runs it, with the environment its Job gives the pod."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path
from typing import Any

from tests.helpers import ROOT, stack_doc
from trainmaster.cluster import free_port
from trainmaster.objects import build_gang_job, render_launch_script
from trainmaster.spec import load_spec_text

TRAIN = ROOT / "examples" / "data-parallel" / "train.py"


def _spec(steps: int) -> Any:
    import yaml

    doc = stack_doc("dev")
    job = next(j for j in doc["jobs"] if j["name"] == "dp-example")
    job["command"] = [sys.executable, str(TRAIN)]  # the repo's copy, not the image's path
    job["hyperParameters"] = {"trainSteps": steps, "checkpointEvery": 5}
    return load_spec_text(yaml.safe_dump(doc), "dev.yaml")


def _pod_env(spec: Any, resume_from: str, index: int, port: int, ckpt: Path) -> dict[str, str]:
    job = spec.job("dp-example")
    gang = build_gang_job(spec, job, attempt=1, resume_from=resume_from)
    container = gang["spec"]["template"]["spec"]["containers"][0]
    env = {e["name"]: e["value"] for e in container["env"] if "value" in e}
    assert env["WORLD_SIZE"] == "2" and env["NPROC_PER_NODE"] == "1"
    env.update({
        "JOB_COMPLETION_INDEX": str(index),  # set by the Indexed Job
        "MASTER_ADDR": "127.0.0.1",  # the headless Service name, on loopback here
        "MASTER_PORT": str(port),
        "TRAINMASTER_CHECKPOINT_DIR": str(ckpt),
        "TRAINMASTER_JOB": "",  # no TrainingJob to report to here
        "PATH": f"{Path(sys.executable).parent}:{os.environ['PATH']}",
    })
    return env


def _run_gang(script: Path, spec: Any, resume_from: str, ckpt: Path) -> list[str]:
    port = free_port()
    procs = [subprocess.Popen(["bash", str(script)], env=_pod_env(spec, resume_from, i, port,
                                                                   ckpt),
                              stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True)
             for i in range(2)]
    outs = [p.communicate(timeout=120)[0] for p in procs]
    assert [p.returncode for p in procs] == [0, 0], outs
    return outs


def test_python_launcher_runs_one_rank_per_pod_and_resumes(tmp_path: Path) -> None:
    spec = _spec(steps=10)
    script = tmp_path / "launch.sh"
    script.write_text(render_launch_script(spec.job("dp-example")))
    ckpt = tmp_path / "checkpoints"
    first = _run_gang(script, spec, "", ckpt)
    assert "rank 0 step 10 loss" in first[0] and "rank 1 step 10 loss" in first[1]
    assert (ckpt / "step-10" / "COMPLETE").exists()

    longer = _spec(steps=15)
    script.write_text(render_launch_script(longer.job("dp-example")))
    second = _run_gang(script, longer, str(ckpt / "step-10"), ckpt)
    assert f"resuming from {ckpt / 'step-10'} (restart 1)" in second[0]
    assert f"rank 0: resumed from {ckpt / 'step-10'} at step 10" in second[0]
    assert "rank 1: resumed from rank 0 at step 10" in second[1]
    assert "rank 0 step 11 loss" in second[0] and "rank 0 step 10 loss" not in second[0]
    assert (ckpt / "step-15" / "COMPLETE").exists()
