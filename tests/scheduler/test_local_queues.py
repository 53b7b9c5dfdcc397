"""LocalQueues: in a team's namespace a queue label names a LocalQueue of that namespace,
resolved to the queue its spec.clusterQueue names; a missing one is reported on the pods
and the PodGroup (LocalQueueNotFound) and the gang is never bound. Against the in-memory
API, and the resolution rules on their own."""

from __future__ import annotations

import asyncio
from typing import Any

import pytest

from tests.scheduler.apifake import Cluster, fake_runtime, group_obj, node_obj, pod_obj, run_once
from trainmaster.api import CLUSTER_QUEUE_NOT_FOUND, LOCAL_QUEUE_NOT_FOUND, QUEUE_LABEL
from trainmaster.kubeclient import ADDED, DELETED, MODIFIED, localqueue_path
from trainmaster.scheduler import ConfigError, SchedulerConfig
from trainmaster.scheduler.runtime.local_queues import LocalQueues

TEAMS = ("team-a", "team-b")
GPU_QUEUES = "queues", [{"name": "alpha", "nominalQuota": 8}, {"name": "beta", "nominalQuota": 8}]


def _lq(name: str, namespace: str, cluster_queue: str) -> dict[str, Any]:
    return {"metadata": {"name": name, "namespace": namespace, "uid": f"lq-{name}",
                         "resourceVersion": "1"},
            "spec": {"clusterQueue": cluster_queue}}


def _labelled(obj: dict[str, Any], queue: str) -> dict[str, Any]:
    obj["metadata"].setdefault("labels", {})[QUEUE_LABEL] = queue
    return obj


def _serve(cluster: Cluster, lqs: list[dict[str, Any]]) -> None:
    """The LocalQueue list of each team namespace (the scheduler watches them one by one)."""
    for ns in TEAMS:
        cluster.lists[localqueue_path(ns)] = [q for q in lqs if q["metadata"]["namespace"] == ns]


def _config(**extra: Any) -> SchedulerConfig:
    return SchedulerConfig.from_mapping({
        "reportIntervalSeconds": 0, "namespaces": ["trainmaster", *TEAMS],
        "localQueueNamespaces": list(TEAMS), "queues": GPU_QUEUES[1], **extra})


# --- the index ------------------------------------------------------------------------


def test_resolution_rules() -> None:
    lqs = LocalQueues(TEAMS)
    assert lqs.on_local_queue(ADDED, _lq("lq-a", "team-a", "alpha")) == "team-a"
    assert lqs.on_local_queue(ADDED, _lq("default", "team-a", "beta")) == "team-a"
    assert lqs.on_local_queue(MODIFIED, _lq("lq-a", "team-a", "alpha")) is None  # no change
    # Only the namespace's own LocalQueues count.
    assert lqs.resolve("team-a", "lq-a") == "alpha"
    assert lqs.resolve("team-b", "lq-a") is None and not lqs.found("team-b", "lq-a")
    # Unlabelled work in a team namespace: its LocalQueue `default`.
    assert lqs.resolve("team-a", None) == "beta" and lqs.found("team-a", None)
    assert not lqs.found("team-b", None)
    # A team cannot name a scheduler queue directly.
    assert lqs.resolve("team-a", "alpha") is None and not lqs.found("team-a", "alpha")
    # Elsewhere (the cluster's namespace) the label is the queue, as it always was.
    assert lqs.resolve("trainmaster", "alpha") == "alpha"
    assert lqs.resolve("trainmaster", None) is None and lqs.found("trainmaster", "x")
    # A LocalQueue moved to another queue, then deleted.
    assert lqs.on_local_queue(MODIFIED, _lq("lq-a", "team-a", "beta")) == "team-a"
    assert lqs.resolve("team-a", "lq-a") == "beta"
    assert lqs.on_local_queue(DELETED, _lq("lq-a", "team-a", "beta")) == "team-a"
    assert not lqs.found("team-a", "lq-a")
    # LocalQueues of a namespace that does not resolve through them change nothing.
    assert lqs.on_local_queue(ADDED, _lq("x", "trainmaster", "alpha")) is None


def test_missing_message_names_the_choices_and_the_field() -> None:
    lqs = LocalQueues(TEAMS)
    lqs.on_local_queue(ADDED, _lq("lq-a", "team-a", "alpha"))
    message = lqs.missing_message("team-a", "nope")
    assert "LocalQueue team-a/nope not found" in message
    assert "name one of lq-a" in message and "scheduler.localQueues" in message
    empty = lqs.missing_message("team-b", None)
    assert "no queue label" in empty and "LocalQueue 'default'" in empty
    assert "has no LocalQueue yet" in empty


def test_config_reads_local_queue_namespaces() -> None:
    config = _config()
    assert config.local_queue_namespaces == TEAMS
    assert SchedulerConfig().local_queue_namespaces == ()
    with pytest.raises(ConfigError, match="localQueueNamespaces"):
        SchedulerConfig.from_mapping({"localQueueNamespaces": "team-a"})


# --- the runtime ----------------------------------------------------------------------


def test_a_gang_resolves_through_its_namespace_local_queue_and_is_charged_there() -> None:
    pods = [_labelled(pod_obj(f"a{i}", namespace="team-a", group="ga"), "lq-a")
            for i in range(2)]
    groups = [_labelled(group_obj("ga", 2, namespace="team-a"), "lq-a")]
    cluster = Cluster([node_obj("n1"), node_obj("n2")], pods, groups)
    _serve(cluster, [_lq("lq-a", "team-a", "alpha")])

    api, rt = run_once(cluster, _config(), drain=True)

    assert sorted(cluster.binds) == ["a0", "a1"]
    assert rt.cache.ledger.used("alpha") == 8 and rt.cache.ledger.used("beta") == 0
    assert not [b for _, b in api.posts("/events") if b["reason"] == LOCAL_QUEUE_NOT_FOUND]


def test_the_local_queue_quota_holds_a_second_gang() -> None:
    """Charged to alpha (8 GPUs): a second gang of the same LocalQueue waits on alpha's
    quota, though beta has room; the message names the resolved queue."""
    pods = [_labelled(pod_obj(f"{g}{i}", namespace="team-a", group=g), "lq-a")
            for g in ("ga", "gb") for i in range(2)]
    groups = [_labelled(group_obj(g, 2, namespace="team-a"), "lq-a") for g in ("ga", "gb")]
    cluster = Cluster([node_obj("n1"), node_obj("n2"), node_obj("n3")], pods, groups)
    _serve(cluster, [_lq("lq-a", "team-a", "alpha")])

    api, _ = run_once(cluster, _config(), drain=True)

    assert len(cluster.binds) == 2
    messages = [b["message"] for _, b in api.posts("/events")
                if b["reason"] == "FailedScheduling"]
    assert messages and all("queue alpha: 8/8 GPUs in use" in m for m in messages)


def test_a_gang_naming_no_local_queue_is_told_and_never_bound() -> None:
    """team-b names LocalQueue lq-a, which only team-a has, and a scheduler queue
    directly: neither resolves there. The cluster's namespace keeps the direct label."""
    pods = [_labelled(pod_obj(f"b{i}", namespace="team-b", group="gb"), "lq-a")
            for i in range(2)]
    pods += [_labelled(pod_obj("direct", namespace="team-b", group="gd"), "alpha")]
    pods += [_labelled(pod_obj("t0", namespace="trainmaster", group="gt"), "alpha")]
    groups = [_labelled(group_obj("gb", 2, namespace="team-b"), "lq-a"),
              group_obj("gd", 1, namespace="team-b"),
              group_obj("gt", 1, namespace="trainmaster")]
    cluster = Cluster([node_obj("n1"), node_obj("n2")], pods, groups)
    _serve(cluster, [_lq("lq-a", "team-a", "alpha")])

    api, rt = run_once(cluster, _config(), drain=True)

    assert sorted(cluster.binds) == ["t0"]
    assert rt.cache.ledger.used("alpha") == 4
    conditions = {path.split("/")[-2]: body["status"]["conditions"][0]
                  for method, path, body in api.calls
                  if method == "PATCH" and path.endswith("/status")}
    assert sorted(conditions) == ["b0", "b1", "direct"]
    for pod, cond in conditions.items():
        assert (cond["type"], cond["status"], cond["reason"]) == (
            "PodScheduled", "False", LOCAL_QUEUE_NOT_FOUND)
        wanted = "alpha" if pod == "direct" else "lq-a"
        assert f"LocalQueue team-b/{wanted} not found" in cond["message"]
        assert "scheduler.localQueues" in cond["message"]
    events = sorted((e["involvedObject"]["kind"], e["involvedObject"]["name"], e["type"])
                    for _, e in api.posts("/events") if e["reason"] == LOCAL_QUEUE_NOT_FOUND)
    assert events == [("Pod", "b0", "Warning"), ("Pod", "b1", "Warning"),
                      ("Pod", "direct", "Warning"), ("PodGroup", "gb", "Warning"),
                      ("PodGroup", "gd", "Warning")]


def test_a_local_queue_created_later_lets_the_waiting_gang_in() -> None:
    pods = [_labelled(pod_obj("a0", namespace="team-a", group="ga"), "lq-a")]
    groups = [_labelled(group_obj("ga", 1, namespace="team-a"), "lq-a")]
    cluster = Cluster([node_obj("n1")], pods, groups)
    _serve(cluster, [])
    _, rt = fake_runtime(cluster, _config())

    async def run() -> None:
        await rt.start()
        await rt.step()
        assert not cluster.binds
        rt.cache.on_local_queue(ADDED, _lq("lq-a", "team-a", "alpha"))
        await rt.step()
        await rt.idle()
        await rt.writer.drain(1)
        await rt.shutdown()

    asyncio.run(run())
    assert cluster.binds == {"a0": "n1"}
    assert rt.cache.ledger.used("alpha") == 4


def test_without_local_queue_namespaces_nothing_changes_and_no_informer_starts() -> None:
    pods = [_labelled(pod_obj("a0", namespace="team-a", group="ga"), "alpha")]
    groups = [group_obj("ga", 1, namespace="team-a")]
    cluster = Cluster([node_obj("n1")], pods, groups)
    api, rt = run_once(cluster, SchedulerConfig.from_mapping({"queues": GPU_QUEUES[1]}),
                       drain=True)
    assert cluster.binds == {"a0": "n1"} and rt.cache.ledger.used("alpha") == 4
    assert not [p for m, p, _ in api.calls if "localqueues" in p]


def test_local_queues_are_watched_in_the_team_namespaces_only() -> None:
    cluster = Cluster([node_obj("n1")], [], [])
    _serve(cluster, [])
    api, _ = run_once(cluster, _config(), drain=True)
    assert sorted({p for m, p, _ in api.calls if "localqueues" in p}) == [
        localqueue_path(ns) for ns in TEAMS]


def test_a_local_queue_pointing_at_a_missing_queue_is_reported_as_such() -> None:
    pods = [_labelled(pod_obj("a0", namespace="team-a", group="ga"), "lq-x")]
    groups = [_labelled(group_obj("ga", 1, namespace="team-a"), "lq-x")]
    cluster = Cluster([node_obj("n1")], pods, groups)
    _serve(cluster, [_lq("lq-x", "team-a", "ghost")])

    api, _ = run_once(cluster, _config(), drain=True)

    assert not cluster.binds
    events = [e for _, e in api.posts("/events") if e["reason"] == CLUSTER_QUEUE_NOT_FOUND]
    assert sorted(e["involvedObject"]["kind"] for e in events) == ["Pod", "PodGroup"]
    assert events[0]["message"] == (
        "LocalQueue team-a/lq-x points at queue ghost, which trainmaster-scheduler does not "
        "have (queues: alpha, beta): fix its clusterQueue in the cluster spec's "
        "scheduler.localQueues")
