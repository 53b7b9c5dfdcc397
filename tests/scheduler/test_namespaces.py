"""A pod naming the scheduler in a namespace it does not serve is told so and never bound;
the served namespaces' pods are bound. Against the in-memory API."""

from __future__ import annotations

from typing import Any

import pytest

from tests.scheduler.apifake import Cluster, FakeApi, group_obj, node_obj, pod_obj, run_once
from trainmaster.scheduler import ConfigError, SchedulerConfig


def _conditions(api: FakeApi) -> dict[str, dict[str, Any]]:
    return {path: body["status"]["conditions"][0] for method, path, body in api.calls
            if method == "PATCH" and path.endswith("/status")}


def test_a_gang_in_an_unserved_namespace_is_told_which_field_to_change() -> None:
    pods = [pod_obj(f"a{i}", namespace="team-a", group="ga") for i in range(2)]
    pods += [pod_obj(f"b{i}", namespace="team-b", group="gb") for i in range(2)]
    groups = [group_obj("ga", 2, namespace="team-a"), group_obj("gb", 2, namespace="team-b")]
    cluster = Cluster([node_obj("n1"), node_obj("n2")], pods, groups)
    config = SchedulerConfig(report_interval=0.0, namespaces=("trainmaster", "team-a"))

    api, _ = run_once(cluster, config, drain=True)

    assert sorted(cluster.binds) == ["a0", "a1"]  # the served namespace's gang only
    conditions = _conditions(api)
    assert sorted(conditions) == [f"/api/v1/namespaces/team-b/pods/b{i}/status"
                                  for i in range(2)]
    for cond in conditions.values():
        assert (cond["type"], cond["status"], cond["reason"]) == (
            "PodScheduled", "False", "NamespaceNotServed")
        assert "scheduler.namespaces" in cond["message"]
        assert "team-b" in cond["message"] and "trainmaster, team-a" in cond["message"]
    events = [b for _, b in api.posts("/events")]
    not_served = sorted((e["involvedObject"]["kind"], e["involvedObject"]["name"], e["type"],
                         e["metadata"]["namespace"])
                        for e in events if e["reason"] == "NamespaceNotServed")
    assert not_served == [("Pod", "b0", "Warning", "team-b"), ("Pod", "b1", "Warning", "team-b"),
                          ("PodGroup", "gb", "Warning", "team-b")]


def test_a_scheduler_without_namespaces_serves_every_namespace() -> None:
    cluster = Cluster([node_obj("n1")], [pod_obj("solo", namespace="anywhere")], [])
    api, _ = run_once(cluster, SchedulerConfig(report_interval=0.0), drain=True)
    assert cluster.binds == {"solo": "n1"}
    assert not [b for _, b in api.posts("/events") if b["reason"] == "NamespaceNotServed"]


def test_config_reads_namespaces() -> None:
    config = SchedulerConfig.from_mapping({"namespaces": ["trainmaster", "team-a", "team-a"]})
    assert config.namespaces == ("trainmaster", "team-a")
    assert config.serves("team-a") and not config.serves("team-b")
    with pytest.raises(ConfigError, match="namespaces"):
        SchedulerConfig.from_mapping({"namespaces": "team-a"})
