"""The upstream gang API (scheduling.k8s.io/v1beta1 Workload and PodGroup, a pod's
spec.schedulingGroup) on the real local control plane, whose `cluster up` turns on the
GenericWorkload and TopologyAwareWorkloadScheduling gates and serves the version.

Each test brings its own kwok nodes, namespace and schedulerName, runs
trainmaster-scheduler as a subprocess and removes everything at the end."""

from __future__ import annotations

import contextlib
from pathlib import Path
from typing import Any

import pytest
import yaml
from kubernetes import client

from tests.conftest import LocalCluster
from tests.scheduler.live import PODGROUPS, SchedulerProcess, Scratch, processes, wait_for
from tests.scheduler.test_queues_live import priority_classes

pytestmark = pytest.mark.integration

UPSTREAM = ("scheduling.k8s.io", "v1beta1")
QUEUE_LABEL = "kueue.x-k8s.io/queue-name"
LEAF_KEY = "topology.trainmaster.io/leaf"


def _workload_and_group(scratch: Scratch, name: str, min_count: int,
                        queue: str | None = None) -> None:
    """A Workload with one gang template and the PodGroup made from it, as a workload
    controller would make them."""
    policy = {"gang": {"minCount": min_count}}
    constraints = {"topology": [{"key": LEAF_KEY}]}
    custom = scratch.custom
    custom.create_namespaced_custom_object(*UPSTREAM, scratch.namespace, "workloads", {
        "apiVersion": "scheduling.k8s.io/v1beta1", "kind": "Workload",
        "metadata": {"name": name},
        "spec": {"podGroupTemplates": [{"name": "workers", "schedulingPolicy": policy,
                                        "schedulingConstraints": constraints}]},
    })
    labels = {QUEUE_LABEL: queue} if queue else {}
    custom.create_namespaced_custom_object(*UPSTREAM, scratch.namespace, "podgroups", {
        "apiVersion": "scheduling.k8s.io/v1beta1", "kind": "PodGroup",
        "metadata": {"name": f"{name}-workers", "labels": labels},
        "spec": {"workloadRef": {"workloadName": name, "templateName": "workers"},
                 "schedulingPolicy": policy, "schedulingConstraints": constraints},
    })


def _member(scratch: Scratch, name: str, group: str, label: str | None = None,
            priority_class: str | None = None) -> dict[str, Any]:
    body = scratch.pod(name, gpus=8, group=label)
    body["spec"]["schedulingGroup"] = {"podGroupName": group}
    if priority_class:
        body["spec"]["priorityClassName"] = priority_class
    return body


def _condition(scratch: Scratch, group: str) -> dict[str, Any] | None:
    obj = scratch.custom.get_namespaced_custom_object(*UPSTREAM, scratch.namespace,
                                                      "podgroups", group)
    return next((c for c in (obj.get("status") or {}).get("conditions") or []
                 if c["type"] == "PodGroupInitiallyScheduled"), None)


def _status(scratch: Scratch, group: str, status: str) -> dict[str, Any] | None:
    cond = _condition(scratch, group)
    return cond if cond is not None and cond["status"] == status else None


@contextlib.contextmanager
def _cleanup_groups(scratch: Scratch) -> Any:
    try:
        yield
    finally:  # their finalizer holds the namespace until the pods are gone
        for plural in ("podgroups", "workloads"):
            with contextlib.suppress(client.ApiException):
                scratch.custom.delete_collection_namespaced_custom_object(
                    *UPSTREAM, scratch.namespace, plural)


def test_an_upstream_podgroup_is_placed_whole_under_one_leaf_and_reports_its_condition(
    local_cluster: LocalCluster, scratch: Scratch, tmp_path: Path
) -> None:
    for i in range(2):
        scratch.add_node(f"a{i}", leaf="leaf-a")
    wait_for(scratch.nodes_ready, "scratch nodes Ready")
    # The precedence rule: trio-2 also carries the label of a scheduler-plugins PodGroup
    # of one member; it belongs to the upstream gang all the same, so nothing binds while
    # the gang does not fit (the label would have let it start alone).
    scratch.create_group("decoy", 1)
    with _cleanup_groups(scratch), processes() as procs:
        _workload_and_group(scratch, "trio", 3)
        names = {f"trio-{i}" for i in range(3)}
        scratch.create_pods([_member(scratch, n, "trio-workers",
                                     label="decoy" if n == "trio-2" else None)
                             for n in sorted(names)])
        pod = scratch.core.read_namespaced_pod("trio-0", scratch.namespace)
        assert pod.to_dict()["spec"]["scheduling_group"] == {"pod_group_name": "trio-workers"}
        procs.append(SchedulerProcess(local_cluster.kubeconfig, scratch, tmp_path, "one"))
        waiting = wait_for(lambda: _status(scratch, "trio-workers", "False"),
                           "PodGroupInitiallyScheduled=False on the PodGroup")
        assert waiting["reason"] == "Unschedulable"
        assert "leaf" in waiting["message"], waiting
        assert scratch.bound() == {}

        for i in range(3):
            scratch.add_node(f"b{i}", leaf="leaf-b")
        bound = wait_for(lambda: (b := scratch.bound()) and len(b) == 3 and b, "gang bound")
        assert set(bound) == names
        assert {scratch.leaf_of(n) for n in bound.values()} == {f"tm-{scratch.tag}-leaf-b"}
        done = wait_for(lambda: _status(scratch, "trio-workers", "True"),
                        "PodGroupInitiallyScheduled=True")
        assert done["reason"] == "Scheduled"


def test_queue_quota_holds_an_upstream_gang_by_its_podgroup_queue_label(
    local_cluster: LocalCluster, scratch: Scratch, tmp_path: Path
) -> None:
    for i in range(3):
        scratch.add_node(f"a{i}", leaf="leaf-a")
    wait_for(scratch.nodes_ready, "scratch nodes Ready")
    config = tmp_path / "config.yaml"
    config.write_text(yaml.safe_dump({"queues": [{"name": "small", "nominalQuota": 16},
                                                 {"name": "big", "nominalQuota": 64}]}))
    with _cleanup_groups(scratch), processes() as procs:
        procs.append(SchedulerProcess(local_cluster.kubeconfig, scratch, tmp_path, "one",
                                      "--config", str(config)))
        _workload_and_group(scratch, "over", 3, queue="small")
        scratch.create_pods([_member(scratch, f"over-{i}", "over-workers") for i in range(3)])
        waiting = wait_for(lambda: _status(scratch, "over-workers", "False"),
                           "the over-quota gang's condition")
        assert "queue small" in waiting["message"], waiting
        assert scratch.bound() == {}

        _workload_and_group(scratch, "fits", 3, queue="big")
        scratch.create_pods([_member(scratch, f"fits-{i}", "fits-workers") for i in range(3)])
        bound = wait_for(lambda: (b := scratch.bound()) and len(b) == 3 and b, "big bound")
        assert set(bound) == {f"fits-{i}" for i in range(3)}
        assert _status(scratch, "over-workers", "False") is not None


def test_cluster_up_keeps_the_topology_constraint_next_to_a_plugins_podgroup(
    scratch: Scratch,
) -> None:
    """With TopologyAwareWorkloadScheduling off the API server drops the constraint
    without a word; both PodGroup kinds live side by side under one name."""
    scratch.create_group("same", 1)
    with _cleanup_groups(scratch):
        _workload_and_group(scratch, "same", 1)
        plugins = scratch.custom.get_namespaced_custom_object(
            *PODGROUPS[:2], scratch.namespace, PODGROUPS[2], "same")
        upstream = scratch.custom.get_namespaced_custom_object(
            *UPSTREAM, scratch.namespace, "podgroups", "same-workers")
        assert plugins["spec"]["minMember"] == 1
        assert upstream["spec"]["schedulingConstraints"] == {"topology": [{"key": LEAF_KEY}]}


def test_a_high_priority_upstream_gang_preempts_a_lower_one_whole(
    local_cluster: LocalCluster, scratch: Scratch, tmp_path: Path
) -> None:
    for leaf in ("leaf-a", "leaf-b"):
        for i in range(2):
            scratch.add_node(f"{leaf}-{i}", leaf=leaf)
    wait_for(scratch.nodes_ready, "scratch nodes Ready")
    config = tmp_path / "config.yaml"
    config.write_text(yaml.safe_dump({"queues": [], "preemption": True}))
    with priority_classes(scratch, {"low": 10, "high": 1000}) as pc, \
            _cleanup_groups(scratch), processes() as procs:
        procs.append(SchedulerProcess(local_cluster.kubeconfig, scratch, tmp_path, "one",
                                      "--config", str(config)))
        lows = {}
        for gang in ("low-a", "low-b"):
            _workload_and_group(scratch, gang, 2)
            scratch.create_pods([_member(scratch, f"{gang}-{i}", f"{gang}-workers",
                                         priority_class=pc["low"]) for i in range(2)])
            lows[gang] = {f"{gang}-{i}" for i in range(2)}
        wait_for(lambda: len(scratch.bound()) == 4, "both low gangs bound")

        _workload_and_group(scratch, "high", 2)
        scratch.create_pods([_member(scratch, f"high-{i}", "high-workers",
                                     priority_class=pc["high"]) for i in range(2)])
        high = {"high-0", "high-1"}
        after = wait_for(lambda: (b := scratch.bound()) and high <= set(b) and b,
                         "high bound", 120)
        assert len({scratch.leaf_of(after[n]) for n in high}) == 1
        names = {p.metadata.name for p in scratch.pods() if p.metadata.deletion_timestamp is None}
        gone = [g for g, pods in lows.items() if not pods & names]
        kept = [g for g, pods in lows.items() if pods <= names]
        assert len(gone) == 1 and len(kept) == 1, names  # one whole gang evicted, one kept
        events = scratch.core.list_namespaced_event(scratch.namespace).items
        preempted = [e for e in events if e.reason == "Preempted"
                     and e.involved_object.kind == "PodGroup"]
        assert preempted and all(
            e.involved_object.api_version == "scheduling.k8s.io/v1beta1"
            and e.involved_object.name == f"{gone[0]}-workers" for e in preempted)
        done = wait_for(lambda: _status(scratch, "high-workers", "True"), "high's condition")
        assert done["reason"] == "Scheduled"
