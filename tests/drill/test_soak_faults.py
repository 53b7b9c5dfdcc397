"""The soak's fault table, which pods it may hit, and when a node loss is behind it (no
cluster needed; the real-node soak is tests/cluster/test_real_soak.py)."""

from __future__ import annotations

from typing import Any

from trainmaster.api import NIC_CONDITION, NODE_READY
from trainmaster.drill import (
    FAULT_KINDS,
    Fault,
    SoakResult,
    _elastic,
    _soak,
    _torch_elastic,
    account,
    progress_marks,
)
from trainmaster.drill._faults import (
    kill_container,
    kill_process,
    lose_node,
    stop_kubelet,
    take_rail_down,
)
from trainmaster.drill._logs import LogLine
from trainmaster.drill._soak import FAULTS, _restarted_since, whole_gang

REAL = ["leaf-0-node-0", "leaf-0-node-1", "leaf-0-node-2"]


def test_the_faults_come_in_turn_and_the_node_loss_is_a_real_one() -> None:
    assert FAULT_KINDS == ("worker-kill", "container-kill", "node-loss", "nic-down")
    table = {kind: (inject, back) for kind, inject, back in FAULTS}
    assert table["worker-kill"] == (kill_process, "")
    assert table["container-kill"] == (kill_container, "")
    # The node loss stops the kubelet AND kills the pod's containers (lose_node), not the
    # kubelet alone, and is behind the soak once the node is Ready again.
    assert table["node-loss"] == (lose_node, NODE_READY)
    assert table["nic-down"] == (take_rail_down, NIC_CONDITION)


def test_the_soak_and_both_elastic_drills_share_the_one_node_loss() -> None:
    for module in (_soak, _elastic, _torch_elastic):
        assert module.lose_node is lose_node
        assert not hasattr(module, "stop_kubelet")  # no node loss of their own
    assert stop_kubelet is not lose_node  # node-not-ready (a hung kubelet) stays its own


def _pod(name: str, node: str, phase: str = "Running", deleting: bool = False
         ) -> dict[str, Any]:
    meta: dict[str, Any] = {"name": name}
    if deleting:
        meta["deletionTimestamp"] = "2026-12-05T20:00:00Z"
    return {"metadata": meta, "spec": {"nodeName": node}, "status": {"phase": phase}}


def test_a_lost_nodes_terminating_pod_is_no_target_and_the_gang_not_whole_without_it(
        ) -> None:
    survivor = _pod("lm-r0-0-a", REAL[0])
    stuck = _pod("lm-r0-1-b", REAL[1], deleting=True)  # Running, its kubelet stopped
    # Elastic 1..2 after the shrink: the stuck pod does not make the gang whole, so no
    # fault is injected (it would pick the stuck pod, whose containers are dead).
    assert whole_gang([survivor, stuck], REAL, 2) == []
    replacement = _pod("lm-r0-1-c", REAL[2])
    assert whole_gang([survivor, stuck, replacement], REAL, 2) == [survivor, replacement]
    # Pending pods and pods off the real nodes do not count either.
    assert whole_gang([survivor, _pod("lm-r0-1-d", REAL[2], phase="Pending")], REAL, 2) == []
    assert whole_gang([survivor, _pod("lm-r0-1-e", "kwok-node-3")], REAL, 2) == []


def _marks(*lines: tuple[float, str]) -> list[Any]:
    return progress_marks(LogLine(t, text) for t, text in lines)


FAULT_AT = 30.0


def test_an_elastic_node_loss_is_behind_the_soak_once_the_survivors_new_round_steps(
        ) -> None:
    before = [(0.0, "rank 0 of 2: pid 10, torchrun restart 0"),
              *((1.0 + s, f"step {s} loss 2.{s:02d}") for s in range(1, 30))]
    assert not _restarted_since(_marks(*before), FAULT_AT)
    # The survivor's torchrun re-rendezvoused at world size 1 and resumed.
    shrunk = [*before, (40.0, "rank 0 of 1: pid 20, torchrun restart 1"),
              (41.0, "rank 0: resumed from /ck/lm/step-20 at step 20 (world size 1)")]
    assert not _restarted_since(_marks(*shrunk), FAULT_AT)  # no step yet
    assert _restarted_since(_marks(*shrunk, (42.0, "step 21 loss 2.10")), FAULT_AT)


def test_a_hung_kubelet_alone_is_not_a_recovery_the_old_gang_trains_on() -> None:
    # What the soak's old node loss did: the lost node's rank trained on at full size.
    # Steps after the fault are no new run, so the soak must not take it as recovered.
    lines = [(0.0, "rank 0 of 2: pid 10, torchrun restart 0"),
             *((1.0 + s, f"step {s} loss 2.{s:02d}") for s in range(1, 90))]
    assert not _restarted_since(_marks(*lines), FAULT_AT)


def test_a_rigid_node_loss_is_behind_the_soak_once_the_new_gang_steps() -> None:
    old = [(0.0, "rank 0/2: joined the gang on leaf-0-node-0"),
           *((1.0 + s * 0.25, f"rank 0 step {s} loss 0.{s:04d}") for s in range(1, 116))]
    new = [(75.0, "rank 0/2: joined the gang on leaf-0-node-2"),
           (75.5, "rank 0: resumed from /ck/dp/step-100 at step 100"),
           (76.0, "rank 0 step 101 loss 0.0101")]
    assert not _restarted_since(_marks(*old), FAULT_AT)
    assert _restarted_since(_marks(*old, *new), FAULT_AT)


def _result(faults: int, due: int) -> SoakResult:
    lines = [(0.0, "rank 0/2: joined the gang on leaf-0-node-0"),
             *((1.0 + s * 0.5, f"rank 0 step {s} loss 0.{s:04d}") for s in range(1, 100)),
             (51.0, "rank 0/2: joined the gang on leaf-0-node-2"),
             *((52.0 + (s - 81) * 0.5, f"rank 0 step {s} loss 0.{s:04d}")
               for s in range(81, 210))]
    marks = _marks(*lines)
    injected = [Fault("worker-kill", 30.0 + i, REAL[1]) for i in range(faults)]
    return SoakResult("dp-example", "python", 2, 30, account(marks, injected, 0, 120),
                      tuple(REAL), tuple(marks), due)


def test_a_soak_that_injected_fewer_faults_than_it_announced_is_not_ok() -> None:
    assert _result(1, 1).ok
    short = _result(1, 3)
    assert not short.ok
    assert short.row()["faults_due"] == 3 and len(short.row()["faults"]) == 1
