"""The real training job on two real nodes, killed for real and resumed from its own
checkpoint (issue 11). The same code as `trainmaster demo` and `bench recovery --real`
(trainmaster.drill): stacks/dev with its controllers and the CPU job examples/data-parallel
on the real nodes, the image built (cached) and loaded, the checkpoint volume a host folder.

- the job's pods were placed by the in-cluster trainmaster-scheduler on the real nodes;
- a SIGKILL to one rank's training process, and then to its container through containerd:
  each time the operator restarts the gang, rank 0 logs that it resumed at the newest
  checkpoint on disk, and every rank trains past it.
"""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest
import yaml

from trainmaster.api import JOB_LABEL
from trainmaster.drill import RealStack, run_drill, start_real_stack, wait_controllers
from trainmaster.kubeclient import SyncKube, api_path

pytestmark = [pytest.mark.integration, pytest.mark.realnode, pytest.mark.image]

ROOT = Path(__file__).resolve().parents[2]


def _log(line: str) -> None:
    print(line, flush=True)


@pytest.fixture(scope="module")
def stack(trainmaster_home: Path, tmp_path_factory: pytest.TempPathFactory
          ) -> Iterator[RealStack]:
    from trainmaster import cluster

    # stacks/dev under another name, so a `make demo` cluster of this host is left alone.
    doc = yaml.safe_load((ROOT / "stacks" / "dev" / "cluster.yaml").read_text())
    doc["metadata"]["name"] = "drill"
    path = tmp_path_factory.mktemp("drill") / "cluster.yaml"
    path.write_text(yaml.safe_dump(doc, sort_keys=False))
    real = start_real_stack(path, 2, _log)
    try:
        wait_controllers(real, _log)
        yield real
    finally:
        cluster.down_state_dir(real.state_dir)


def test_the_job_trains_on_the_real_nodes_placed_by_the_in_cluster_scheduler(
    stack: RealStack,
) -> None:
    result = run_drill(stack, "process-kill", _log)
    assert result.killed.node in stack.record.real_nodes
    assert "train.py" in result.killed.what
    assert result.last_checkpoint_step is not None and result.last_checkpoint_step > 0
    assert result.resumed_step == result.last_checkpoint_step, result
    assert result.resumed_from.endswith(f"/step-{result.last_checkpoint_step}"), result
    assert result.steps_after > result.resumed_step
    assert 0 <= result.lost_steps < 2 * 20 + 5, result  # checkpointEvery 20, a few in flight
    assert 0 < result.detect_seconds < result.recover_seconds
    with SyncKube.connect(stack.kubeconfig) as kube:
        pods = kube.list(api_path("v1", "pods", stack.namespace), f"{JOB_LABEL}={stack.job.name}")
        running = [p for p in pods if (p.get("status") or {}).get("phase") == "Running"]
        assert {p["spec"]["nodeName"] for p in running} <= set(stack.record.real_nodes)
        assert all(p["spec"]["schedulerName"] == stack.spec.scheduler.name for p in running)
        # The binding was the in-cluster scheduler's: its PodGroup's Scheduled event.
        events = kube.list(api_path("v1", "events", stack.namespace))
        scheduled = [e for e in events if e.get("reason") == "Scheduled"
                     and e["involvedObject"]["kind"] == "PodGroup"
                     and e["involvedObject"]["name"].startswith(stack.job.name)]
        assert scheduled, "no Scheduled event on the job's PodGroups"
        assert {(e.get("source") or {}).get("component") or e.get("reportingComponent")
                for e in scheduled} == {stack.spec.scheduler.name}
    # The checkpoints really are files the job wrote in the shared volume.
    assert (stack.checkpoints / f"step-{result.last_checkpoint_step}" / "weights.npy").exists() \
        or result.last_checkpoint_step < max(
            int(p.name.split("-")[1]) for p in stack.checkpoints.glob("step-*")
            if p.name.split("-")[1].isdigit())


def test_a_killed_container_resumes_from_the_last_checkpoint(stack: RealStack) -> None:
    newest = max(int(p.name.split("-")[1]) for p in stack.checkpoints.glob("step-*")
                 if p.name.split("-")[1].isdigit())
    result = run_drill(stack, "container-kill", _log, after_checkpoint=newest)
    assert result.last_checkpoint_step is not None and result.last_checkpoint_step > newest
    assert result.killed.what.startswith("container ")
    assert result.resumed_step == result.last_checkpoint_step, result
    assert result.steps_after > result.resumed_step
    assert result.ok
