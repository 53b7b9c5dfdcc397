"""The scheduler publishes its queue ledger (what it admitted per queue) by server-side
apply, so `trainmaster status` shows its numbers; against the in-memory API."""

from __future__ import annotations

import asyncio
from typing import Any

import yaml

from tests.scheduler.apifake import Cluster, fake_runtime, group_obj, node_obj, pod_obj
from trainmaster.scheduler import QueueSpec, SchedulerConfig
from trainmaster.scheduler.runtime.config import LeaderElection

PATH = "/api/v1/namespaces/tm-system/configmaps/trainmaster-scheduler-queue-usage"


def _labelled(obj: dict[str, Any], queue: str) -> dict[str, Any]:
    obj["metadata"].setdefault("labels", {})["kueue.x-k8s.io/queue-name"] = queue
    return obj


def test_the_ledger_counts_a_gangs_pods_by_its_podgroups_queue_and_is_applied() -> None:
    # Running: a gang whose pods carry no queue label; its PodGroup names the queue.
    running = [pod_obj(f"r{i}", group="g", gpus=8, node=f"n{i}", phase="Running")
               for i in range(2)]
    pending = [_labelled(pod_obj("p0", gpus=4), "research")]
    cluster = Cluster([node_obj("n0"), node_obj("n1"), node_obj("n2")], running + pending,
                      [_labelled(group_obj("g", 2), "research")])
    config = SchedulerConfig(report_interval=0.0,
                             queues=(QueueSpec("research", nominal_quota=16, cohort="all"),
                                     QueueSpec("prod", nominal_quota=8, cohort="all")),
                             leader_election=LeaderElection(lease_namespace="tm-system"))
    api, rt = fake_runtime(cluster, config)

    async def run() -> None:
        await rt.start()
        await rt.step()
        await rt.idle()
        await rt.writer.drain(1)
        await rt.step()  # after the bind: the ledger changed, publish again
        await rt.writer.drain(1)
        await rt.shutdown()

    asyncio.run(run())
    assert cluster.binds == {"p0": "n2"}
    applies = [body for method, path, body in api.calls if method == "PATCH" and path == PATH]
    assert applies, "the ledger was never published"
    last = applies[-1]
    assert last["metadata"]["labels"]["app.kubernetes.io/component"] == "queue-ledger"
    doc = yaml.safe_load(last["data"]["usage.yaml"])
    usage = {q["name"]: q["flavorsUsage"][0]["resources"][0] for q in doc["queues"]}
    # 16 GPUs of the unlabelled gang (its PodGroup's queue) + 4 of the pod admitted now:
    # borrowing 4 from the cohort.
    assert usage["research"] == {"name": "nvidia.com/gpu", "total": 20, "borrowed": 4}
    assert usage["prod"]["total"] == 0
    assert {q["name"]: q.get("nominalQuota") for q in doc["queues"]} == {"prod": 8,
                                                                         "research": 16}
    assert [u.in_use for u in rt.cache.ledger.usage() if u.name == "research"] == [20]


def test_an_unchanged_ledger_is_not_written_again() -> None:
    cluster = Cluster([node_obj("n0")], [_labelled(pod_obj("r0", node="n0", phase="Running"),
                                                   "research")], [])
    _, rt = fake_runtime(cluster, SchedulerConfig(queues=(QueueSpec("research"),)))

    async def run() -> None:
        await rt.start()
        for _ in range(3):
            rt.cache.changed.set()
            await rt.step()
            await rt.writer.drain(1)
        await rt.shutdown()

    asyncio.run(run())
    assert rt.ledger.writes == 1
