"""What a torchrun job's pods run: the real torchrun with --nnodes=MIN:MAX (elastic) or N,
a worker per GPU (NPROC_PER_NODE, which a CPU-only job overrides), --max-restarts from the
restart policy, the c10d rendezvous with an explicit store host, and for an elastic job the
candidates the launcher elects the store from (trainmaster.launch._store) instead of
trainmaster's own rendezvous."""

from __future__ import annotations

from typing import Any

import pytest

from tests.helpers import stack_doc
from trainmaster.objects import build_gang, render_launch_script
from trainmaster.spec import ClusterSpec, SpecInvalidError, validate_data

ELASTIC = {"name": "llm-elastic", "image": "nvcr.io/nvidia/pytorch:24.05-py3",
           "launcher": "torchrun", "nodes": 3, "command": ["python", "pretrain.py"],
           "checkpoint": {"volume": "checkpoints", "path": "/checkpoints/llm"},
           "restartPolicy": {"maxRestarts": 4}, "elastic": {"minNodes": 2, "maxNodes": 4}}


def _spec(job: dict[str, Any]) -> ClusterSpec:
    doc = stack_doc("dev")
    doc["jobs"].append(job)
    return validate_data(doc, "dev.yaml")


def _env(spec: ClusterSpec, name: str) -> dict[str, str]:
    job = next(o for o in build_gang(spec, spec.job(name), attempt=2) if o["kind"] == "Job")
    container = job["spec"]["template"]["spec"]["containers"][0]
    return {e["name"]: e["value"] for e in container["env"] if "value" in e}


def test_an_elastic_torchrun_job_runs_torchrun_over_its_range() -> None:
    spec = _spec(ELASTIC)
    script = render_launch_script(spec.job("llm-elastic"))
    assert 'exec "${WRAP[@]}" torchrun' in script
    assert '--nnodes=2:4 --nproc-per-node="${NPROC_PER_NODE}"' in script
    assert "--max-restarts=4" in script
    assert '--rdzv-backend=c10d --rdzv-id="${TRAINMASTER_GANG_UID:-llm-elastic}"' in script
    assert '--rdzv-endpoint="${MASTER_ADDR}:${TRAINMASTER_RDZV_PORT:-29400}"' in script
    # Short rendezvous timers: a lost node is dropped ~8 s after its last keep-alive, and
    # the smaller round closes 3 s after its minimum joined (torchrun: 15 s and 30 s).
    assert ('--rdzv-conf="is_host=${IS_HOST},last_call_timeout=3,keep_alive_interval=1,'
            'keep_alive_max_attempt=8"') in script
    assert "--node-rank" not in script  # inert under c10d: the rendezvous assigns ranks
    env = _env(spec, "llm-elastic")
    assert env["NNODES"] == "2:4" and env["NPROC_PER_NODE"] == "8"
    assert env["TRAINMASTER_RDZV_CANDIDATES"] == \
        "llm-elastic-r2-{index}.llm-elastic.trainmaster.svc:29400"
    assert env["TRAINMASTER_RDZV_NODES"] == "4" and env["TRAINMASTER_RDZV_REELECT"] == "4"
    # torchrun's agent does the rendezvous and restarts, not trainmaster's.
    assert "TRAINMASTER_ELASTIC" not in env


def _gang_job(spec: ClusterSpec, name: str) -> dict[str, Any]:
    job: dict[str, Any] = next(o for o in build_gang(spec, spec.job(name), attempt=2)
                               if o["kind"] == "Job")
    return job


IN_PLACE = {**ELASTIC, "elastic": None, "nodes": 2,
            "restartPolicy": {"maxRestarts": 4, "containerRestart": "inPlace"}}


def test_a_rigid_torchrun_job_runs_a_fixed_size_on_pod_0s_store() -> None:
    spec = _spec({**ELASTIC, "elastic": None, "nodes": 2})
    script = render_launch_script(spec.job("llm-elastic"))
    assert '--nnodes=2 --nproc-per-node="${NPROC_PER_NODE}"' in script
    assert '--rdzv-conf="is_host=${IS_HOST}"' in script
    job = _gang_job(spec, "llm-elastic")  # containerRestart gang, the default
    assert job["spec"]["template"]["spec"]["restartPolicy"] == "Never"
    assert job["spec"]["backoffLimit"] == 0
    env = _env(spec, "llm-elastic")
    assert env["NNODES"] == "2"
    assert "TRAINMASTER_RDZV_CANDIDATES" not in env and "TRAINMASTER_ELASTIC" not in env


def test_a_rigid_torchrun_jobs_lost_container_restarts_in_its_pod() -> None:
    spec = _spec(IN_PLACE)
    job = _gang_job(spec, "llm-elastic")
    assert job["spec"]["template"]["spec"]["restartPolicy"] == "OnFailure"
    assert job["spec"]["backoffLimit"] == 4  # restartPolicy.maxRestarts, then the gang
    assert "backoffLimitPerIndex" not in job["spec"]
    # The restarted container rejoins the rendezvous once its lost agent is dropped from
    # the last round: 8 missed heartbeats of 1 s.
    assert ('--rdzv-conf="is_host=${IS_HOST},keep_alive_interval=1,'
            'keep_alive_max_attempt=8"') in render_launch_script(spec.job("llm-elastic"))


@pytest.mark.parametrize(("changes", "why"), [
    ({"launcher": "python"}, "it needs launcher torchrun"),
    ({"elastic": {"minNodes": 1, "maxNodes": 2}}, "an elastic job's lost member"),
    ({"restartPolicy": {"containerRestart": "inPlace", "retryableExitCodes": [1, 137]}},
     "retryableExitCodes must be any"),
])
def test_in_place_container_restarts_are_refused_where_they_cannot_work(
        changes: dict[str, Any], why: str) -> None:
    doc = stack_doc("dev")
    doc["jobs"].append({**IN_PLACE, **changes})
    with pytest.raises(SpecInvalidError) as raised:
        validate_data(doc, "dev.yaml")
    issues = [i for i in raised.value.issues
              if i.path.endswith("restartPolicy.containerRestart")]
    assert len(issues) == 1 and why in issues[0].message, issues
    assert "set containerRestart to gang" in issues[0].message


def test_a_cpu_only_job_sets_its_workers_per_pod() -> None:
    spec = _spec({**ELASTIC, "env": {"NPROC_PER_NODE": "1"}})
    assert _env(spec, "llm-elastic")["NPROC_PER_NODE"] == "1"


def test_an_elastic_python_job_keeps_trainmasters_rendezvous() -> None:
    spec = _spec({**ELASTIC, "launcher": "python"})
    env = _env(spec, "llm-elastic")
    assert env["TRAINMASTER_ELASTIC"] == "2:4"
    assert "TRAINMASTER_RDZV_CANDIDATES" not in env
