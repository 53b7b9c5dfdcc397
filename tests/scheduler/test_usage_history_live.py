"""Fair-share usage history survives a SIGKILLed leader, on the real local control plane.

Three queues borrow everything from their cohort's 16 GPUs, with a usage half-life. Queue
a runs a 16-GPU gang for a while, then it ends: a's decayed usage is high, b's is nil.
Queue c's gang then holds the cohort while a gang of a, then one of b, wait. A standby
starts only then (it has not watched a's gang run), the leader is killed (SIGKILL), the
standby leads, and c's gang ends. The old leader would give the cohort to b's gang (a ran
a lot recently); a leader without the history sees a tie and gives it to a's, the older
(run with the load disabled, this test fails there). The new leader gives it to b's.
"""

from __future__ import annotations

import signal
from pathlib import Path

import pytest
import yaml
from kubernetes import client

from tests.conftest import LocalCluster
from tests.scheduler.live import SchedulerProcess, Scratch, processes, wait_for
from trainmaster.api import QUEUE_LABEL, queue_ledger_name

pytestmark = pytest.mark.integration


def _config(tmp_path: Path) -> str:
    path = tmp_path / "config.yaml"
    path.write_text(yaml.safe_dump({
        "preemption": False,
        "queues": [{"name": "a", "nominalQuota": 0, "cohort": "lab"},
                   {"name": "b", "nominalQuota": 0, "cohort": "lab"},
                   {"name": "c", "nominalQuota": 0, "cohort": "lab"}],
        "cohorts": [{"name": "lab", "resources": [{"name": "nvidia.com/gpu",
                                                   "nominalQuota": 16}]}],
        "fairSharing": {"enable": True},
        "admissionFairSharing": {"usageHalfLifeSeconds": 600},
        "usageHistoryIntervalSeconds": 1,
    }))
    return str(path)


def _gang(scratch: Scratch, name: str, queue: str) -> set[str]:
    scratch.create_group(name, 2)
    pods = []
    for i in range(2):
        body = scratch.pod(f"{name}-{i}", gpus=8, group=name)
        body["metadata"]["labels"][QUEUE_LABEL] = queue
        pods.append(body)
    scratch.create_pods(pods)
    return {p["metadata"]["name"] for p in pods}


def _end(scratch: Scratch, gang: str, pods: set[str]) -> None:
    """The gang's pods deleted, and gone."""
    scratch.core.delete_collection_namespaced_pod(
        scratch.namespace, label_selector=f"scheduling.x-k8s.io/pod-group={gang}",
        grace_period_seconds=0)
    wait_for(lambda: not any(p.metadata.name in pods for p in scratch.pods()),
             f"{gang}'s pods gone", 120)


def test_a_sigkilled_leaders_successor_keeps_the_fair_share_order(
    local_cluster: LocalCluster, scratch: Scratch, tmp_path: Path
) -> None:
    for name in ("n0", "n1"):  # one leaf: a two-pod gang needs both nodes
        scratch.add_node(name, leaf="leaf-a")
    wait_for(scratch.nodes_ready, "scratch nodes Ready", 300)
    coord = client.CoordinationV1Api(scratch.api_client)

    def holder() -> str:
        try:
            lease = coord.read_namespaced_lease(scratch.scheduler, scratch.namespace)
        except client.ApiException:
            return ""
        return str(lease.spec.holder_identity or "")

    config = _config(tmp_path)
    gauge = "trainmaster_scheduler_leader"
    with processes() as procs:
        first = SchedulerProcess(local_cluster.kubeconfig, scratch, tmp_path, "r1",
                                 "--config", config)
        procs.append(first)
        wait_for(lambda: holder() == "r1", "r1 to lead", 120)

        # Queue a runs the whole cohort for a while, then its gang ends.
        ran = _gang(scratch, "a0", "a")
        wait_for(lambda: ran <= set(scratch.bound()), "a0 bound", 180)
        cm_name = queue_ledger_name(scratch.scheduler)

        def saved_a() -> float:
            try:
                cm = scratch.core.read_namespaced_config_map(cm_name, scratch.namespace)
            except client.ApiException:
                return 0.0
            doc = yaml.safe_load((cm.data or {}).get("history.yaml") or "{}") or {}
            return float(((doc.get("queues") or {}).get("a") or {}).get("nvidia.com/gpu", 0))

        wait_for(lambda: saved_a() > 0.05, "queue a's usage history written", 120)
        _end(scratch, "a0", ran)
        # Queue c holds the cohort now; a's gang, then b's, wait for it.
        held = _gang(scratch, "c0", "c")
        wait_for(lambda: held <= set(scratch.bound()), "c0 bound", 180)
        older = _gang(scratch, "a1", "a")
        newer = _gang(scratch, "b1", "b")

        # The standby starts now: it never saw a's gang run (a standby that watched it
        # would have averaged it itself), so only the saved history can tell it.
        second = SchedulerProcess(local_cluster.kubeconfig, scratch, tmp_path, "r2",
                                  "--config", config)
        procs.append(second)
        wait_for(lambda: second.metrics().get(gauge) == 0, "the standby up", 120)
        first.kill(signal.SIGKILL)
        wait_for(lambda: holder() == "r2", "the standby to take the lease", 90)
        wait_for(lambda: second.metrics().get(gauge) == 1, "the new leader scheduling", 60)
        # c's gang ends: the cohort's 16 GPUs go to one of the two waiting gangs.
        _end(scratch, "c0", held)
        wait_for(lambda: newer <= set(scratch.bound()), "b's gang bound first", 180)
        assert not older & set(scratch.bound())  # a's waits: the cohort is full
        log = (tmp_path / "scheduler-r2.log").read_text()
        assert "usage history of a, b, c loaded" in log
