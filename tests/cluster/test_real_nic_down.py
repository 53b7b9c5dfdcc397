"""A NIC fault that is a real link going down (issue 37): stacks/dev on three real nodes
with the monitoring stack; `ip link set … down` on rail 0's interface of a node running a
rank of the data-parallel job (trainmaster.drill, the same code as `trainmaster drill
nic-down` and `bench recovery --real --scenario nic-down`).

- the NIC agent on that node, reading the real interface, sets NICHealthy=False naming it;
- the operator fences the node (cordon + taint), then restarts the gang, which resumes
  from the newest checkpoint on the two other real nodes;
- NodeNICUnhealthy fires for the node in the real Prometheus and reaches Alertmanager;
- link up: NICHealthy=True again; the node stays fenced (sticky, docs/operator.md) until
  `operator unfence`, after which it is schedulable.
"""

from __future__ import annotations

import subprocess
from collections.abc import Iterator
from pathlib import Path

import pytest

from tests.cluster.realkit import dev_stack
from trainmaster.drill import (
    RealStack,
    run_nic_down,
    wait_prometheus,
)

pytestmark = [pytest.mark.integration, pytest.mark.realnode, pytest.mark.image]

ROOT = Path(__file__).resolve().parents[2]


def _log(line: str) -> None:
    print(line, flush=True)


@pytest.fixture(scope="module")
def stack(trainmaster_home: Path, tmp_path_factory: pytest.TempPathFactory
          ) -> Iterator[RealStack]:
    with dev_stack("nic", 3, tmp_path_factory.mktemp("nic"), monitoring=True) as real:
        yield real


def test_a_rail_link_down_fences_the_node_and_the_gang_resumes_elsewhere(stack: RealStack
                                                                         ) -> None:
    result = run_nic_down(stack, _log, wait_prometheus(stack))
    _log(f"nic-down: {result.row()}")
    drill = result.drill
    node = drill.killed.node
    interval = stack.spec.monitoring.nic_agent.interval_seconds
    assert result.interface == next(n for n in stack.nodes if n.name == node).rail(0)
    assert result.interface in result.condition_message, result
    # The agent looks every `interval` seconds; the operator fences on its condition and
    # restarts the gang after fencing.
    assert 0 < result.detect_seconds <= interval + 15, result
    assert result.detect_seconds <= result.fence_seconds <= drill.detect_seconds + 1, result
    # The gang trains again from its checkpoint on the two other real nodes.
    assert drill.ok, drill
    assert node not in drill.nodes_after
    assert set(drill.nodes_after) <= set(stack.record.real_nodes)
    assert drill.resumed_step == (drill.checkpoint_at_start or drill.last_checkpoint_step)
    # NodeNICUnhealthy has `for: 1m` on top of the agent's verdict.
    assert result.alert_seconds is not None and result.alertmanager_seconds is not None
    assert result.detect_seconds + 60 <= result.alert_seconds + 5, result
    assert result.alert_seconds <= result.alertmanager_seconds
    # Link up: healthy again, fenced until lifted, then schedulable.
    assert result.cleared_seconds <= interval + 15, result
    assert result.fenced_after_clear and result.schedulable_after_unfence
    assert result.ok
    link = subprocess.run(["ip", "-o", "link", "show", result.interface],
                          capture_output=True, text=True, check=True).stdout
    assert "state UP" in link or ",UP" in link, link
