"""The elastic drill of the PyTorch job on two real nodes (issue 38): examples/transformer
in the torch image under torchrun, elastic 1..2 (`--nnodes=1:2`, c10d rendezvous on the
store the launcher elects), loses a node (its kubelet stopped, its pod's container killed):
torchrun's agent on the surviving node re-rendezvouses at world size 1 and trains on from
the newest complete DCP checkpoint; the node returns, the Job's replacement pod joins the
rendezvous and the gang grows back to world size 2, without the operator restarting it.
World sizes, resumed steps and times come from the pods' logs and the checkpoint folder
(trainmaster.drill._torch_elastic).

Starts a real-node cluster with the torch image (about 9 GB per node): one such cluster
at a time on a host (`make test-drills`)."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from tests.cluster.realkit import dev_stack
from tests.helpers import STACKS
from trainmaster.drill import (
    RealStack,
    job_status,
    make_torch_elastic,
    run_torch_elastic_drill,
)
from trainmaster.image import torch_reference
from trainmaster.kubeclient import SyncKube
from trainmaster.spec import load_spec

pytestmark = [
    pytest.mark.integration, pytest.mark.realnode, pytest.mark.image, pytest.mark.drill,
]

TARGET_SECONDS = 20
"""Issue 38: the survivors train again within 20 s of the node's loss."""


def _log(line: str) -> None:
    print(line, flush=True)


@pytest.fixture(scope="module")
def stack(trainmaster_home: Path, tmp_path_factory: pytest.TempPathFactory
          ) -> Iterator[RealStack]:
    torch_image = torch_reference(load_spec(STACKS / "dev" / "cluster.yaml").image.reference)

    def edit(doc: dict[str, Any]) -> None:
        make_torch_elastic(doc, torch_image, 1, 2)

    with dev_stack("torch-elastic", 2, tmp_path_factory.mktemp("torch-elastic"), edit,
                   job_images=[torch_image]) as real:
        yield real


def test_the_torch_job_shrinks_on_node_loss_and_grows_back(stack: RealStack) -> None:
    assert stack.job.launcher == "torchrun" and stack.job.elastic is not None
    shrink, grow = run_torch_elastic_drill(stack, _log)
    _log(f"shrink: {shrink.row()}")
    _log(f"grow: {grow.row()}")
    assert (shrink.world_size_before, shrink.world_size_after) == (2, 1)
    # The survivor resumed from a complete checkpoint no older than the newest on disk at
    # the loss (DCP resharded it to world size 1) and trained past it.
    assert shrink.checkpoint_at_fault is not None
    assert shrink.ok, shrink
    assert shrink.recover_seconds <= TARGET_SECONDS, shrink
    assert (grow.world_size_before, grow.world_size_after) == (1, 2)
    assert grow.ok, grow
    with SyncKube.connect(stack.kubeconfig) as kube:
        status = job_status(kube, stack.namespace, stack.job.name)
    # One gang throughout: the operator shrank and grew it, it never restarted it.
    assert status.get("attempt", 0) == 0 and not status.get("restarts"), status
    assert status["elastic"]["worldSize"] == 2
