"""The wake-up index in a real scheduler process on the real control plane: a gang that
waits for capacity is bound once a pod frees it, and /metrics counts the wake-up by its
reason (issue 41)."""

from __future__ import annotations

from pathlib import Path

import pytest

from tests.conftest import LocalCluster
from tests.scheduler.live import SchedulerProcess, Scratch, processes, wait_for

pytestmark = pytest.mark.integration


def test_a_release_wakes_the_waiting_gang_and_the_metrics_say_why(
    local_cluster: LocalCluster, scratch: Scratch, tmp_path: Path
) -> None:
    node = scratch.add_node("a", gpus=8)
    wait_for(scratch.nodes_ready, "the node Ready and untainted")
    with processes() as started:
        proc = SchedulerProcess(local_cluster.kubeconfig, scratch, tmp_path, "r0")
        started.append(proc)
        scratch.create_pods([scratch.pod("holder", gpus=8)])
        wait_for(lambda: scratch.bound().get("holder") == node, "the holder bound")
        scratch.create_gangs({"waits": 2}, gpus=4)  # 8 GPUs: only once the holder is gone
        wait_for(lambda: proc.metrics().get(
            'trainmaster_scheduler_schedule_attempts_total{result="unschedulable"}', 0) >= 1,
            "the gang tried and found unschedulable")
        assert "waits-0" not in scratch.bound()
        scratch.core.delete_namespaced_pod("holder", scratch.namespace, grace_period_seconds=0)
        wait_for(lambda: {"waits-0", "waits-1"} <= set(scratch.bound()), "the gang bound")
        metrics = wait_for(lambda: (m := proc.metrics()).get(
            'trainmaster_scheduler_retry_wakeups_total{reason="capacity"}', 0) >= 1 and m,
            "a capacity wake-up counted")
    assert metrics['trainmaster_scheduler_retry_wakeups_total{reason="new"}'] >= 2
    assert metrics["trainmaster_scheduler_retry_backoffs_total"] >= 1
    assert "trainmaster_scheduler_retry_full_passes_total" in metrics
