"""The wake-up index in a real scheduler process on the real control plane: a gang that
waits for capacity is bound once a pod frees it, and /metrics counts the wake-up by its
reason (issue 41)."""

from __future__ import annotations

from pathlib import Path

import pytest
import yaml

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


def _said(scratch: Scratch) -> dict[str, str]:
    """Each pod's PodScheduled=False message, by pod name."""
    out = {}
    for pod in scratch.pods():
        for cond in pod.status.conditions or []:
            if cond.type == "PodScheduled" and cond.status == "False":
                out[pod.metadata.name] = str(cond.message or "")
    return out


def test_a_parked_gang_tells_all_its_pods_why_once_it_is_complete(
    local_cluster: LocalCluster, scratch: Scratch, tmp_path: Path
) -> None:
    """The report that the interval holds back (new words within 5 s of the last one) is
    written when the interval is up, not when an event next wakes the parked gang: a gang
    told "incomplete" while its pods arrive then says why it waits on all of them. The
    backoff is long here (30 s), so no retry writes it first; live with 2,000 gangs
    waiting, such reports came a minute late, in the middle of the next refill."""
    scratch.add_node("a", gpus=8)
    wait_for(scratch.nodes_ready, "the node Ready and untainted")
    config = tmp_path / "config.yaml"
    config.write_text(yaml.safe_dump({"backoffInitialSeconds": 30, "backoffMaxSeconds": 60}))
    with processes() as started:
        started.append(SchedulerProcess(local_cluster.kubeconfig, scratch, tmp_path, "r0",
                                        "--config", str(config)))
        scratch.create_group("big", 4)  # 4 x 8 GPUs on one 8-GPU node: never fits
        scratch.create_pods([scratch.pod(f"big-{i}", gpus=8, group="big") for i in range(2)])
        wait_for(lambda: "incomplete" in _said(scratch).get("big-0", ""),
                 "the first pods told the gang is incomplete")
        scratch.create_pods([scratch.pod(f"big-{i}", gpus=8, group="big")
                             for i in range(2, 4)])
        # Nothing else happens on this node: before the held-back report was written, the
        # gang, parked on capacity, kept "incomplete" on two pods and nothing on the
        # others until its backoff ran out.
        said = wait_for(lambda: (s := _said(scratch)) and len(s) == 4 and not any(
            "incomplete" in m for m in s.values()) and s,
            "every pod told why the complete gang waits", timeout=20)
    assert all("fits in no single leaf" in m or "Insufficient" in m for m in said.values()), \
        said
