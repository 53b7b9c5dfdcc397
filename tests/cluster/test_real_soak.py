"""The soak on the real nodes (issue 38): stacks/dev's numpy job on three real nodes for
five minutes, a fault a minute, in turn a worker kill, a container kill, a node loss
(`lose_node`: kubelet stopped and the pod's containers killed; kubelet resumed) and a NIC
down (rail 0's link down, up): the same code as
`trainmaster drill soak`. Each fault is recovered, the step log runs on without a gap
after every resume, and the ETTR is a ratio of the job's own step times to the wall."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from tests.cluster.realkit import dev_stack
from trainmaster.api import NODE_READY, UNHEALTHY_TAINT
from trainmaster.drill import FAULT_KINDS, RealStack, run_soak, soak_spec
from trainmaster.kubeclient import SyncKube, node_path

pytestmark = [
    pytest.mark.integration, pytest.mark.realnode, pytest.mark.image, pytest.mark.drill,
]

MINUTES, EVERY = 5, 60
CHECKPOINT_EVERY = 20  # stacks/dev's dp-example


def _log(line: str) -> None:
    print(line, flush=True)


@pytest.fixture(scope="module")
def stack(trainmaster_home: Path, tmp_path_factory: pytest.TempPathFactory
          ) -> Iterator[RealStack]:
    import yaml

    from tests.helpers import STACKS

    folder = tmp_path_factory.mktemp("soak")
    # The soak's own edits of the spec (restarts for every fault, steps to outlast it).
    edited = yaml.safe_load(soak_spec(STACKS / "dev" / "cluster.yaml", folder, 4).read_text())

    def edit(doc: dict[str, Any]) -> None:
        doc["jobs"] = edited["jobs"]

    with dev_stack("soak", 3, folder, edit) as real:
        yield real


def test_every_fault_in_turn_is_recovered_and_the_ettr_adds_up(stack: RealStack) -> None:
    result = run_soak(stack, MINUTES, EVERY, _log, timeout=300)
    _log(f"soak: {result.row()}")
    acc = result.accounting
    # One a minute, each once the one before is behind us (a node back, unfenced).
    assert [c.fault.kind for c in acc.faults] == list(FAULT_KINDS), result.row()
    assert result.faults_due == len(FAULT_KINDS), result.row()
    for cost in acc.faults:
        assert cost.fault.node in stack.record.real_nodes
        assert cost.recover_seconds is not None and cost.recover_seconds > 0, cost
        # The numpy job: every fault restarts the gang, which resumes at a checkpoint.
        assert cost.restarted and cost.resumed_step is not None, cost
        assert cost.resumed_step % CHECKPOINT_EVERY == 0, cost
        assert 0 <= cost.steps_lost < 2 * CHECKPOINT_EVERY + 10, cost
    assert acc.monotone, result.row()
    assert acc.runs >= len(acc.faults)
    assert 0 < acc.ettr <= 1 and acc.productive_seconds <= acc.wall_seconds
    assert acc.wall_seconds == pytest.approx(MINUTES * 60, abs=5)
    # Counted steps took their time: no more of them than the wall allows at the job's
    # own step time, and the last step was reached.
    assert acc.steps_counted <= acc.last_step
    assert result.ok
    with SyncKube.connect(stack.kubeconfig) as kube:
        for name in stack.record.real_nodes:  # every node back in service
            node = kube.get(node_path(name))
            ready = [c for c in node["status"]["conditions"] if c["type"] == NODE_READY]
            assert ready and ready[0]["status"] == "True", name
            assert not any(t.get("key") == UNHEALTHY_TAINT
                           for t in node["spec"].get("taints") or []), name
