"""A preempted job resumes at its checkpoint on the real nodes (issue 42): stacks/dev's CPU
job (in the research queue, priority 100) trains on two real nodes; a one-pod gang of the
default queue (priority 1000), required in one leaf and shaped like the job's pods, arrives.
trainmaster-scheduler evicts the job's gang, the operator restarts it (cause Preempted,
not counted against maxRestarts), and once the preemptor has finished, the job's rank 0
logs that it resumed at the newest checkpoint on disk, and every rank trains past it
(steps and checkpoints read from the ranks' logs and the checkpoint folder)."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from tests.cluster.realkit import dev_stack
from trainmaster.drill import (
    RealStack,
    job_status,
    run_preemption_drill,
)
from trainmaster.kubeclient import SyncKube

pytestmark = [pytest.mark.integration, pytest.mark.realnode, pytest.mark.image]

ROOT = Path(__file__).resolve().parents[2]


def _log(line: str) -> None:
    print(line, flush=True)


@pytest.fixture(scope="module")
def stack(trainmaster_home: Path, tmp_path_factory: pytest.TempPathFactory
          ) -> Iterator[RealStack]:
    def edit(doc: dict[str, Any]) -> None:
        for job in doc["jobs"]:
            if job["name"] == "dp-example":
                job["queue"] = "research"  # below the default queue: a preemption victim

    with dev_stack("preempt", 2, tmp_path_factory.mktemp("preempt"), edit) as real:
        yield real


def test_a_preempted_job_resumes_at_its_checkpoint_on_the_real_nodes(
    stack: RealStack,
) -> None:
    result = run_preemption_drill(stack, _log)
    assert result.last_checkpoint_step is not None and result.last_checkpoint_step > 0
    expected = result.checkpoint_at_start or result.last_checkpoint_step
    assert result.resumed_step == expected, result
    assert result.resumed_from.endswith(f"/step-{expected}"), result
    assert result.steps_after > result.resumed_step
    assert set(result.nodes_after) <= set(stack.record.real_nodes)
    with SyncKube.connect(stack.kubeconfig) as kube:
        status = job_status(kube, stack.namespace, stack.job.name)
    [restart] = status["restartHistory"]
    assert restart["cause"] == "Preempted", restart
    assert "preemptor" in restart["message"], restart
    assert not status.get("restarts"), status  # a preemption is not counted
