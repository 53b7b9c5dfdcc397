"""The elastic drill on three real nodes (issue 27): stacks/dev's CPU job, elastic (min 1,
max 3), loses a node (its kubelet stopped, its rank's container killed) and trains on at
two ranks from the newest checkpoint on disk, within 30 s and without the operator
restarting the gang; the node returns and the job grows back to three ranks from the
checkpoint it asked for. World sizes and resumed steps come from the ranks' logs and the
checkpoint folder (trainmaster.drill)."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from tests.cluster.realkit import dev_stack
from trainmaster.drill import (
    RealStack,
    job_status,
    make_elastic,
    run_elastic_drill,
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
        make_elastic(doc, "dp-example", 1, 3)

    with dev_stack("elastic", 3, tmp_path_factory.mktemp("elastic"), edit) as real:
        yield real


def test_the_elastic_job_shrinks_on_node_loss_and_grows_back(stack: RealStack) -> None:
    shrink, grow = run_elastic_drill(stack, _log)
    assert (shrink.world_size_before, shrink.world_size_after) == (3, 2)
    assert shrink.last_checkpoint_step is not None
    # The survivors resumed from the newest checkpoint on disk at the loss: no step lost
    # beyond it.
    assert shrink.resumed_step == shrink.last_checkpoint_step, shrink
    assert shrink.steps_after > shrink.resumed_step
    assert shrink.recover_seconds <= 30, shrink
    # The ranks did not wait for the operator (which waits for NotReady).
    assert shrink.operator_seconds is not None and shrink.recover_seconds < shrink.operator_seconds
    assert (grow.world_size_before, grow.world_size_after) == (2, 3)
    # It grew from the checkpoint its launcher asked rank 0 for (or one completed in the
    # moment before the round was stopped), not from an older one.
    assert grow.last_checkpoint_step is not None, "no checkpoint on demand before the grow"
    assert grow.last_checkpoint_step <= grow.resumed_step < grow.last_checkpoint_step + 20
    assert grow.steps_after > grow.resumed_step
    with SyncKube.connect(stack.kubeconfig) as kube:
        status = job_status(kube, stack.namespace, stack.job.name)
    # One gang throughout: the operator shrank and grew it, it never restarted it.
    assert status.get("attempt") == 0 and not status.get("restarts"), status
    assert status["elastic"]["worldSize"] == 3
    assert status["elastic"]["resizes"] >= 2
