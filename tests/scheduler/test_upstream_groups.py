"""The upstream gang API (scheduling.k8s.io/v1beta1 PodGroup, spec.schedulingGroup) as a
source of gangs: conversion, the precedence rule, and the runtime writing the PodGroup's
status condition. The live test (test_upstream_groups_live.py) runs the same path on the
real control plane."""

from __future__ import annotations

import asyncio
from typing import Any

from tests.scheduler.apifake import (
    Cluster,
    FakeApi,
    fake_runtime,
    group_obj,
    node_obj,
    pod_obj,
)
from trainmaster.scheduler import SchedulerConfig, TopologyMode
from trainmaster.scheduler.framework.model import TopologyConstraint
from trainmaster.scheduler.runtime.convert import pod_group_info, pod_info
from trainmaster.scheduler.runtime.events import ApiWriter
from trainmaster.scheduler.runtime.gangs import Waiting, assemble
from trainmaster.scheduler.runtime.upstream_groups import GroupStatus, upstream_group_info

LEVELS = ("spine", "leaf")
CONFIG = SchedulerConfig(report_interval=0.0)
STATUS_PATH = "/apis/scheduling.k8s.io/v1beta1/namespaces/ns/podgroups/{}/status"


def upstream_obj(name: str, *, min_count: int | None = 2, key: str | None = None,
                 basic: bool = False, conditions: list[dict[str, Any]] | None = None,
                 ) -> dict[str, Any]:
    policy: dict[str, Any] = {"basic": {}} if basic else {"gang": {"minCount": min_count}}
    spec: dict[str, Any] = {"schedulingPolicy": policy}
    if key:
        spec["schedulingConstraints"] = {"topology": [{"key": key}]}
    return {"apiVersion": "scheduling.k8s.io/v1beta1", "kind": "PodGroup",
            "metadata": {"name": name, "namespace": "ns", "uid": f"up-{name}",
                         "labels": {"kueue.x-k8s.io/queue-name": "research"},
                         "resourceVersion": "1", "creationTimestamp": "2026-01-01T00:00:00Z"},
            "spec": spec, "status": {"conditions": conditions or []}}


def member(name: str, group: str, label: str | None = None, gpus: int = 8) -> dict[str, Any]:
    obj = pod_obj(name, group=label, gpus=gpus,
                  extra_spec={"schedulingGroup": {"podGroupName": group}})
    return obj


def test_min_count_and_topology_key_map_onto_the_levels() -> None:
    info = upstream_group_info(upstream_obj("g", min_count=4,
                                            key="topology.trainmaster.io/leaf"), LEVELS)
    assert (info.name, info.ref_name, info.key) == (
        "scheduling.k8s.io:g", "g", "ns/scheduling.k8s.io:g")
    assert info.api_version == "scheduling.k8s.io/v1beta1"
    assert info.min_member == 4 and not info.elastic and info.invalid is None
    assert info.topology == TopologyConstraint("leaf", TopologyMode.REQUIRED)
    assert info.queue == "research"
    node = upstream_group_info(upstream_obj("g", key="kubernetes.io/hostname"), LEVELS)
    assert node.topology == TopologyConstraint("node", TopologyMode.REQUIRED)
    free = upstream_group_info(upstream_obj("g"), LEVELS)
    assert free.topology is None  # the config's policy by size, as for any PodGroup


def test_a_topology_key_that_is_no_level_makes_the_gang_wait_and_says_which_work() -> None:
    info = upstream_group_info(upstream_obj("g", key="topology.kubernetes.io/rack"), LEVELS)
    assert info.invalid is not None and "topology.trainmaster.io/leaf" in info.invalid
    pods = [pod_info(member(f"p{i}", "g")).request for i in range(2)]
    result = assemble(info.key, info, pods, [], CONFIG)
    assert isinstance(result, Waiting)
    assert "PodGroup ns/g" in result.reason and "topology.kubernetes.io/rack" in result.reason


def test_basic_policy_is_an_elastic_gang_of_minimum_one() -> None:
    info = upstream_group_info(upstream_obj("g", basic=True), LEVELS)
    pods = [pod_info(member(f"p{i}", "g")).request for i in range(3)]
    gang = assemble(info.key, info, pods, [], CONFIG)
    assert not isinstance(gang, Waiting)
    assert gang.elastic and gang.required_members == 1 and len(gang.members) == 3


def test_spec_scheduling_group_wins_over_the_scheduler_plugins_label() -> None:
    both = pod_info(member("p", "upstream", label="plugins")).request
    assert both.gang_key == "ns/scheduling.k8s.io:upstream"
    label_only = pod_info(pod_obj("q", group="plugins")).request
    assert label_only.gang_key == "ns/plugins"


def test_pods_wait_for_a_missing_upstream_group_and_say_where_to_look() -> None:
    pod = pod_info(member("p", "later")).request
    result = assemble("ns/scheduling.k8s.io:later", None, [pod], [], CONFIG)
    assert isinstance(result, Waiting)
    assert "PodGroup ns/later (scheduling.k8s.io/v1beta1" in result.reason
    assert "spec.schedulingGroup.podGroupName" in result.reason


def _conditions(calls: list[tuple[str, str, Any]], name: str) -> list[dict[str, Any]]:
    return [body["status"]["conditions"][0] for method, path, body in calls
            if method == "PATCH" and path == STATUS_PATH.format(name)]


def test_runtime_places_the_gang_and_reports_through_the_podgroup_condition() -> None:
    """A same-named scheduler-plugins PodGroup stays another gang; the upstream group gets
    False/Unschedulable while it does not fit, then True, and nothing after True."""
    pods = [member(f"w{i}", "g", gpus=8) for i in range(3)]
    pods += [pod_obj(f"x{i}", group="g", gpus=8) for i in range(2)]
    cluster = Cluster([node_obj("n1"), node_obj("n2")], pods, [group_obj("g", 2)],
                      [upstream_obj("g", min_count=3, key="topology.trainmaster.io/leaf")])
    api, rt = fake_runtime(cluster, CONFIG)

    async def run() -> None:
        await rt.start()
        assert {"ns/g", "ns/scheduling.k8s.io:g"} <= set(rt.cache.groups)
        await rt.step()
        await rt.idle()
        await rt.writer.drain(1)
        # the plugins gang of 2 fits; the upstream gang of 3 needs three more nodes
        assert sorted(cluster.binds) == ["x0", "x1"]
        (waiting,) = _conditions(api.calls, "g")
        assert (waiting["type"], waiting["status"], waiting["reason"]) == (
            "PodGroupInitiallyScheduled", "False", "Unschedulable")
        events = [b for _, b in api.posts("/events") if b["reason"] == "FailedScheduling"]
        assert events[0]["involvedObject"]["apiVersion"] == "scheduling.k8s.io/v1beta1"
        assert events[0]["involvedObject"]["name"] == "g"

        for name in ("n3", "n4", "n5"):
            rt.cache.on_node("ADDED", node_obj(name))
        await rt.step()
        await rt.idle()
        await rt.writer.drain(1)
        assert sorted(cluster.binds) == ["w0", "w1", "w2", "x0", "x1"]
        leaves = {rt.cache.nodes[cluster.binds[f"w{i}"]].labels["topology.trainmaster.io/leaf"]
                  for i in range(3)}
        assert len(leaves) == 1
        done = _conditions(api.calls, "g")[-1]
        assert (done["status"], done["reason"]) == ("True", "Scheduled")
        await rt.shutdown()

    asyncio.run(run())


def test_true_is_terminal_and_plugins_groups_get_no_status_write() -> None:
    done = [{"type": "PodGroupInitiallyScheduled", "status": "True", "reason": "Scheduled"}]
    already = upstream_group_info(upstream_obj("a", conditions=done), LEVELS)
    assert already.initially_scheduled
    fresh = upstream_group_info(upstream_obj("b"), LEVELS)
    api = FakeApi()
    writer = ApiWriter()
    status = GroupStatus(api, writer, "trainmaster-scheduler")  # type: ignore[arg-type]

    async def run() -> None:
        status.unschedulable(already, "no room", "2026-01-01T00:00:00Z")
        status.unschedulable(pod_group_info(group_obj("c", 2)), "no room", "x")
        status.unschedulable(fresh, "queued, still unwritten when it is placed", "x")
        status.scheduled(fresh, "placed")
        status.unschedulable(fresh, "late", "x")  # after our own True, before its echo
        writer.start()
        await writer.drain(1)
        await writer.stop()

    asyncio.run(run())
    assert [(p.rsplit("/", 2)[-2], c["status"]) for p, c in
            ((path, body["status"]["conditions"][0]) for _, path, body in api.calls)] == [
        ("b", "True")]
    (_, _, body), = api.calls
    assert api.calls[0][1] == STATUS_PATH.format("b")
    assert body["metadata"] == {"name": "b", "namespace": "ns"}


def test_an_upstream_gang_resolves_its_queue_label_through_the_namespace_local_queue() -> None:
    """In a team namespace the upstream PodGroup's queue label names a LocalQueue: the
    gang is charged to the queue it points at; one naming no LocalQueue there is told so
    on its PodGroup's condition and never bound."""
    from trainmaster.kubeclient import localqueue_path

    def local_queue(name: str, namespace: str, cluster_queue: str) -> dict[str, Any]:
        return {"metadata": {"name": name, "namespace": namespace, "uid": f"lq-{name}",
                             "resourceVersion": "1"}, "spec": {"clusterQueue": cluster_queue}}

    def in_team(obj: dict[str, Any], queue: str) -> dict[str, Any]:
        obj["metadata"]["namespace"] = "team-a"
        obj["metadata"].setdefault("labels", {})["kueue.x-k8s.io/queue-name"] = queue
        return obj

    pods = [in_team(member(f"a{i}", "ga"), "lq-a") for i in range(2)]
    pods += [in_team(member(f"b{i}", "gb"), "nope") for i in range(2)]
    groups = [in_team(upstream_obj("ga"), "lq-a"), in_team(upstream_obj("gb"), "nope")]
    cluster = Cluster([node_obj(f"n{i}") for i in range(4)], pods, [], groups)
    cluster.lists[localqueue_path("team-a")] = [local_queue("lq-a", "team-a", "alpha")]
    config = SchedulerConfig.from_mapping({
        "reportIntervalSeconds": 0, "namespaces": ["team-a"],
        "localQueueNamespaces": ["team-a"],
        "queues": [{"name": "alpha", "nominalQuota": 64}]})
    api, rt = fake_runtime(cluster, config)

    async def run() -> None:
        await rt.start()
        await rt.step()
        await rt.idle()
        await rt.writer.drain(1)
        await rt.shutdown()

    asyncio.run(run())
    assert sorted(cluster.binds) == ["a0", "a1"]
    assert rt.cache.ledger.used("alpha") == 16
    path = "/apis/scheduling.k8s.io/v1beta1/namespaces/team-a/podgroups/gb/status"
    (refused,) = [b["status"]["conditions"][0] for m, p, b in api.calls
                  if m == "PATCH" and p == path]
    assert (refused["status"], refused["reason"]) == ("False", "LocalQueueNotFound")
    assert "LocalQueue team-a/nope not found" in refused["message"]


def test_a_cluster_without_the_upstream_api_is_scheduled_as_before() -> None:
    """The API off (the gate): its list is 404, and the scheduler runs without it."""
    from trainmaster.kubeclient import ApiError

    class WithoutUpstream(Cluster):
        def __call__(self, method: str, path: str, body: Any) -> dict[str, Any]:
            if path.startswith("/apis/scheduling.k8s.io/"):
                raise ApiError(404, "the server could not find the requested resource")
            return super().__call__(method, path, body)

    pods = [pod_obj(f"x{i}", group="g", gpus=8) for i in range(2)]
    cluster = WithoutUpstream([node_obj("n1"), node_obj("n2")], pods, [group_obj("g", 2)])
    _, rt = fake_runtime(cluster, CONFIG)

    async def run() -> None:
        await rt.start()
        await rt.step()
        await rt.idle()
        await rt.shutdown()

    asyncio.run(run())
    assert sorted(cluster.binds) == ["x0", "x1"]
