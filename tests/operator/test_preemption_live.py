"""Preemption end to end on the real control plane: trainmaster-scheduler (its own name,
its own two kwok nodes) evicts a low-priority TrainingJob's gang for a high-priority one,
and the operator brings the victim back from its last checkpoint without spending a
restart. Waits bound correctness only."""

from __future__ import annotations

import contextlib
import types
import uuid
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
import yaml
from kubernetes import client

from tests.conftest import LocalCluster
from tests.operator.kit import OperatorEnv, job_doc, wait_for
from tests.scheduler.live import SchedulerProcess, processes
from trainmaster.api import CHECKPOINT_ANNOTATION
from trainmaster.objects import PODGROUP_GROUP, PODGROUP_VERSION, rdma_resources
from trainmaster.spec import validate_data

pytestmark = pytest.mark.integration

PARTITION = "trainmaster.io/preemption-test"


@pytest.fixture()
def world(local_cluster: LocalCluster, tmp_path: Path) -> Iterator[tuple[OperatorEnv, str]]:
    """An operator namespace whose spec names its own scheduler and two queues."""
    env = OperatorEnv(local_cluster.kubeconfig, local_cluster.spec, tmp_path)
    tag = uuid.uuid4().hex[:6]
    data = env.spec.model_dump(by_alias=True, exclude_none=True, mode="json")
    data["scheduler"].update({
        "name": f"tm-sched-{tag}", "preemption": True,
        "queues": [{"name": "default"}, {"name": "batch", "priority": 10},
                   {"name": "urgent", "priority": 1000}],
    })  # fmt: skip
    env.spec = validate_data(data, "preemption-test")
    nodes: list[str] = []
    try:
        env.setup()
        for i in range(2):
            name = f"tm-{tag}-n{i}"
            alloc = {"nvidia.com/gpu": "8", "cpu": "128", "memory": "2048Gi", "pods": "110",
                     **{rdma: "1" for rdma in rdma_resources(env.spec)}}
            env.core.create_node({
                "apiVersion": "v1", "kind": "Node",
                "metadata": {"name": name, "annotations": {"kwok.x-k8s.io/node": "fake"},
                             "labels": {"kubernetes.io/hostname": name, PARTITION: tag,
                                        "topology.trainmaster.io/spine": f"tm-{tag}-spine",
                                        "topology.trainmaster.io/leaf": f"tm-{tag}-leaf"}},
                # Job pods tolerate the GPU taint; nothing else goes there.
                "spec": {"taints": [{"key": "nvidia.com/gpu", "value": "present",
                                     "effect": "NoSchedule"}]},
                "status": {"capacity": alloc, "allocatable": alloc},
            })
            nodes.append(name)
        env.start_operator()
        yield env, tag
    finally:
        env.close()
        for name in nodes:
            with contextlib.suppress(client.ApiException):
                env.core.delete_node(name)


def _scheduler(env: OperatorEnv, tag: str, tmp_path: Path) -> SchedulerProcess:
    config = tmp_path / "scheduler.yaml"
    sched = env.spec.scheduler
    config.write_text(yaml.safe_dump({
        "preemption": True,
        "queues": [{"name": q.name, "preemption": q.preemption} for q in sched.queues],
        "nodeSelector": {PARTITION: tag},
    }))
    box = types.SimpleNamespace(scheduler=sched.name, namespace=env.namespace)
    return SchedulerProcess(env.kubeconfig, box, tmp_path, "one",  # type: ignore[arg-type]
                            "--config", str(config))


def _pod_nodes(env: OperatorEnv, job: str, attempt: int) -> list[str]:
    return sorted(p["spec"].get("nodeName") or "" for p in env.pods(job, attempt))


def test_a_preempted_trainingjob_resumes_from_its_checkpoint_without_spending_a_restart(
    world: tuple[OperatorEnv, str], tmp_path: Path
) -> None:
    env, tag = world
    with processes() as procs:
        procs.append(_scheduler(env, tag, tmp_path))
        env.create_job({**job_doc("victim", nodes=2), "queue": "batch"})
        env.wait_gang_running("victim", 0, 2)
        assert all(n.startswith(f"tm-{tag}-") for n in _pod_nodes(env, "victim", 0))
        checkpoint = "/checkpoints/victim/step-100"
        env.report_checkpoint("victim", checkpoint, 100)

        def marked() -> dict[str, Any] | None:
            group: dict[str, Any] = env.custom.get_namespaced_custom_object(
                PODGROUP_GROUP, PODGROUP_VERSION, env.namespace, "podgroups", "victim-r0")
            annotations = group["metadata"].get("annotations") or {}
            return group if CHECKPOINT_ANNOTATION in annotations else None

        wait_for(marked, "the operator marks the PodGroup with the checkpoint time")

        env.create_job({**job_doc("urgent", nodes=2), "queue": "urgent"})
        env.wait_gang_running("urgent", 0, 2)
        assert all(n.startswith(f"tm-{tag}-") for n in _pod_nodes(env, "urgent", 0))

        def requeued() -> dict[str, Any] | None:
            status = env.status("victim")
            return status if status.get("attempt") == 1 else None

        status = wait_for(requeued, "the victim requeued as attempt 1")
        assert status["restarts"] == 0  # not counted against maxRestarts
        entry = status["restartHistory"][-1]
        assert entry["cause"] == "Preempted"
        assert f"{env.namespace}/urgent-r0" in entry["message"]
        assert entry["resumeFrom"] == checkpoint
        assert status["resumeFrom"] == checkpoint
        # The new gang resumes from the checkpoint and waits: urgent holds the nodes.
        jobs = wait_for(lambda: [j for j in env.jobs("victim")
                                 if j["metadata"]["name"] == "victim-r1"], "victim-r1 Job")
        container = jobs[0]["spec"]["template"]["spec"]["containers"][0]
        env_vars = {e["name"]: e.get("value") for e in container["env"]}
        assert env_vars["TRAINMASTER_RESUME_FROM"] == checkpoint
        # The scheduler's Event (on the PodGroup) and the operator's (on the TrainingJob)
        # are written by two processes apart from the status above: wait for both.

        def both_events() -> list[dict[str, Any]] | None:
            events = env.events("Preempted")
            on_group = any(e["involvedObject"]["kind"] == "PodGroup"
                           and e["involvedObject"]["name"] == "victim-r0"
                           and f"{env.namespace}/urgent-r0" in e["message"] for e in events)
            on_job = any(e["involvedObject"]["kind"] == "TrainingJob" for e in events)
            return events if on_group and on_job else None

        assert wait_for(both_events, "the Preempted Events on the PodGroup and the job")
        assert env.status("urgent").get("restarts", 0) == 0
