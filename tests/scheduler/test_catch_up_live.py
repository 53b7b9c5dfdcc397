"""A new leader's wait for its pod watch (runtime/catch_up.py), on the real control plane:
no wait when the watch is current; with a watch that missed binds, exactly those pods
are waited for until the watch delivers them; the wait is bounded."""

from __future__ import annotations

import asyncio

import pytest

from tests.conftest import LocalCluster
from tests.scheduler.live import Scratch, wait_for
from trainmaster.kubeclient import Kube, Reflector, pod_path
from trainmaster.scheduler import SchedulerConfig
from trainmaster.scheduler.runtime.cache import ClusterCache
from trainmaster.scheduler.runtime.catch_up import catch_up

pytestmark = pytest.mark.integration


def test_a_new_leader_waits_only_for_the_pods_its_watch_has_not_seen_bound(
    local_cluster: LocalCluster, scratch: Scratch
) -> None:
    node = scratch.add_node("a")
    scratch.create_pods([scratch.pod(f"p-{i}", gpus=1) for i in range(3)])
    uids = {p.metadata.name: p.metadata.uid for p in scratch.pods()}

    async def scenario() -> tuple[set[str], set[str], set[str], set[str]]:
        api = await Kube.connect(local_cluster.kubeconfig)
        cache = ClusterCache(SchedulerConfig(scheduler_name=scratch.scheduler))
        cache.build_snapshot()
        pods = Reflector(api, pod_path(scratch.namespace), cache.on_pod, name="pods")
        try:
            await pods.relist()  # a standby's cache, its watch not yet running
            assert set(cache.pending) == set(uids.values())
            quiet = await catch_up(api, cache, scratch.scheduler)

            # The old leader binds p-0 and p-1; the standby's watch has not seen it.
            for name in ("p-0", "p-1"):
                await api.post(pod_path(scratch.namespace, name, "binding"), {
                    "apiVersion": "v1", "kind": "Binding", "metadata": {"name": name},
                    "target": {"apiVersion": "v1", "kind": "Node", "name": node}})
            unwatched = await catch_up(api, cache, scratch.scheduler, timeout=0.5)
            still_pending = set(cache.pending)

            watch = asyncio.get_running_loop().call_later(
                0.5, lambda: asyncio.ensure_future(pods.run()))
            stale = await catch_up(api, cache, scratch.scheduler)
            watch.cancel()
            return quiet, unwatched, still_pending, stale
        finally:
            for task in asyncio.all_tasks() - {asyncio.current_task()}:
                task.cancel()
            await api.close()

    quiet, unwatched, still_pending, stale = asyncio.run(scenario())
    bound = {uids["p-0"], uids["p-1"]}
    assert quiet == set()
    assert unwatched == bound  # bounded: it gave up after 0.5 s
    assert bound <= still_pending  # and schedules anyway, on what it knows
    assert stale == bound
    wait_for(lambda: len(scratch.bound()) == 2, "both binds stored")
