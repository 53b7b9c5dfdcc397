"""A new leader's catch-up list (runtime/catch_up.py), on the real control plane: binds the
standby's watch has not delivered are applied from one list (off the pending set, their
node charged); the watch's later events for them change nothing; a current watch finds
nothing to apply."""

from __future__ import annotations

import asyncio

import pytest

from tests.conftest import LocalCluster
from tests.scheduler.live import Scratch, wait_for
from trainmaster.kubeclient import Kube, Reflector, node_path, pod_path
from trainmaster.scheduler import SchedulerConfig
from trainmaster.scheduler.runtime.cache import ClusterCache
from trainmaster.scheduler.runtime.catch_up import catch_up

pytestmark = pytest.mark.integration


def test_a_new_leader_applies_the_binds_its_watch_has_not_delivered(
    local_cluster: LocalCluster, scratch: Scratch
) -> None:
    node = scratch.add_node("a")
    wait_for(scratch.nodes_ready, "the node Ready")
    scratch.create_pods([scratch.pod(f"p-{i}", gpus=2) for i in range(3)])
    uids = {p.metadata.name: p.metadata.uid for p in scratch.pods()}
    bound = {uids["p-0"], uids["p-1"]}

    async def scenario() -> dict[str, object]:
        api = await Kube.connect(local_cluster.kubeconfig)
        cache = ClusterCache(SchedulerConfig(scheduler_name=scratch.scheduler))
        nodes = Reflector(api, node_path(), cache.on_node, name="nodes")
        pods = Reflector(api, pod_path(scratch.namespace), cache.on_pod, name="pods")
        seen: dict[str, object] = {}
        try:
            await nodes.relist()
            cache.build_snapshot()
            await pods.relist()  # a standby's cache, its watch not running
            seen["pending"] = set(cache.pending)
            seen["current"] = await catch_up(api, cache, scratch.scheduler)

            # The old leader binds p-0 and p-1; the standby's watch does not see it.
            for name in ("p-0", "p-1"):
                await api.post(pod_path(scratch.namespace, name, "binding"), {
                    "apiVersion": "v1", "kind": "Binding", "metadata": {"name": name},
                    "target": {"apiVersion": "v1", "kind": "Node", "name": node}})
            seen["applied"] = set(await catch_up(api, cache, scratch.scheduler))
            seen["after"] = set(cache.pending)
            seen["free"] = dict(cache.snapshot.free(node))
            seen["nodes"] = {uid: cache.snapshot.pod_node(uid) for uid in bound}

            # The watch now delivers the binds (and kwok's status updates) late.
            watch = asyncio.ensure_future(pods.run())
            await asyncio.sleep(3)
            watch.cancel()
            seen["late"] = set(cache.pending)
            seen["late_free"] = dict(cache.snapshot.free(node))
            seen["again"] = await catch_up(api, cache, scratch.scheduler)
            return seen
        finally:
            for task in asyncio.all_tasks() - {asyncio.current_task()}:
                task.cancel()
            await api.close()

    seen = asyncio.run(scenario())
    assert seen["pending"] == set(uids.values())
    assert seen["current"] == []  # nothing bound yet: nothing to apply
    assert seen["applied"] == bound
    assert seen["after"] == {uids["p-2"]}
    assert seen["nodes"] == {uid: node for uid in bound}
    free = seen["free"]
    assert isinstance(free, dict) and free["nvidia.com/gpu"] == 8 - 4  # both charged
    assert seen["late"] == {uids["p-2"]}  # the late events re-add nothing
    assert seen["late_free"] == free  # and charge nothing twice
    assert seen["again"] == []
