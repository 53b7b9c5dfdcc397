"""The scheduler's fragmentation gauges, scraped from a real scheduler process on the real
control plane (issue #12: fragmentation was computed but never exported)."""

from __future__ import annotations

from pathlib import Path

import pytest

from tests.conftest import LocalCluster
from tests.scheduler.live import (
    SchedulerProcess,
    Scratch,
    processes,
    wait_for,
)

pytestmark = pytest.mark.integration


def _expected_allocatable(scratch: Scratch) -> float:
    total = 0.0
    for node in scratch.core.list_node().items:
        if node.spec.unschedulable:
            continue
        total += float((node.status.allocatable or {}).get("nvidia.com/gpu", 0))
    return total


def test_fragmentation_and_free_gpus_are_exported(
    local_cluster: LocalCluster, scratch: Scratch, tmp_path: Path
) -> None:
    scratch.add_node("a", gpus=8)
    with processes() as started:
        proc = SchedulerProcess(local_cluster.kubeconfig, scratch, tmp_path, "m0")
        started.append(proc)
        name = "trainmaster_scheduler_allocatable_gpus"
        # Other nodes of the session cluster count too, so the gauge is set before the
        # scheduler has seen the new node: wait until it has.
        metrics = wait_for(lambda: (m := proc.metrics()).get(name) == _expected_allocatable(
            scratch) and m, "the allocatable gauge counting every schedulable node")
    free = metrics["trainmaster_scheduler_free_gpus"]
    assert 0 <= free <= metrics[name]
    for ratio in ("trainmaster_scheduler_gpu_fragmentation_ratio",
                  "trainmaster_scheduler_gpu_leaf_fragmentation_ratio"):
        assert 0.0 <= metrics[ratio] <= 1.0
