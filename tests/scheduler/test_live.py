"""trainmaster-scheduler against the real local control plane (session cluster).

Each test brings its own kwok nodes (tainted so only its pods go there), namespace and
schedulerName, runs the scheduler as a subprocess and stops everything at the end.
Nothing here asserts timing: waits are generous and only bound correctness.
"""

from __future__ import annotations

import signal
import time
from collections import Counter
from pathlib import Path

import pytest
from kubernetes import client

from tests.conftest import LocalCluster
from tests.scheduler.live import (
    SchedulerProcess,
    Scratch,
    processes,
    wait_for,
)

pytestmark = pytest.mark.integration


def _condition(pod: client.V1Pod) -> client.V1PodCondition | None:
    return next((c for c in pod.status.conditions or [] if c.type == "PodScheduled"), None)


def _unschedulable(scratch: Scratch, names: set[str]) -> dict[str, str]:
    out = {}
    for pod in scratch.pods():
        cond = _condition(pod)
        if pod.metadata.name in names and cond is not None and cond.status == "False" \
                and cond.reason == "Unschedulable":
            out[pod.metadata.name] = cond.message
    return out if set(out) == names else {}


def _gang_event(scratch: Scratch, reason: str, group: str) -> bool:
    events = scratch.core.list_namespaced_event(scratch.namespace).items
    return any(e.reason == reason and e.involved_object.kind == "PodGroup"
               and e.involved_object.name == group for e in events)


def _node_gone(scratch: Scratch, name: str) -> bool:
    try:
        scratch.core.read_node(name)
    except client.ApiException as exc:
        return bool(exc.status == 404)
    return False


def test_gang_waits_until_all_of_it_fits_then_binds_together(
    local_cluster: LocalCluster, scratch: Scratch, tmp_path: Path
) -> None:
    scratch.add_node("a")
    scratch.add_node("b")
    wait_for(scratch.nodes_ready, "scratch nodes Ready")
    scratch.create_group("trio", 3)
    names = {f"trio-{i}" for i in range(3)}
    scratch.create_pods([scratch.pod(n, gpus=8, group="trio") for n in sorted(names)])
    with processes() as procs:
        procs.append(SchedulerProcess(local_cluster.kubeconfig, scratch, tmp_path, "one"))
        messages = wait_for(lambda: _unschedulable(scratch, names), "PodScheduled=False")
        assert "fits in no single leaf" in next(iter(messages.values()))
        # The Event is written apart from the pods' conditions: wait for it too.
        assert wait_for(lambda: _gang_event(scratch, "FailedScheduling", "trio"),
                        "the FailedScheduling Event on the PodGroup")
        assert scratch.bound() == {}  # two of three would fit: none is bound

        scratch.add_node("c")  # now all three fit in the leaf
        bound = wait_for(lambda: (b := scratch.bound()) and len(b) == 3 and b, "gang bound")
        assert len(set(bound.values())) == 3
        assert len({scratch.leaf_of(n) for n in bound.values()}) == 1
        assert wait_for(lambda: _gang_event(scratch, "Scheduled", "trio"),
                        "the Scheduled Event on the PodGroup")


def test_cordoned_and_tainted_nodes_are_avoided(
    local_cluster: LocalCluster, scratch: Scratch, tmp_path: Path
) -> None:
    cordoned = scratch.add_node("cordoned", unschedulable=True)
    tainted = scratch.add_node("tainted", taints=[
        {"key": "trainmaster.io/unhealthy", "value": "xid", "effect": "NoSchedule"}])
    good = scratch.add_node("good")
    wait_for(scratch.nodes_ready, "scratch nodes Ready")
    scratch.create_pods([scratch.pod(f"solo-{i}", gpus=8) for i in range(3)])
    with processes() as procs:
        procs.append(SchedulerProcess(local_cluster.kubeconfig, scratch, tmp_path, "one"))
        bound = wait_for(lambda: scratch.bound(), "one pod bound")
        waiting = set(f"solo-{i}" for i in range(3)) - set(bound)
        messages = wait_for(lambda: _unschedulable(scratch, waiting), "the others unschedulable")
        assert list(bound.values()) == [good]
        text = next(iter(messages.values()))
        assert "unschedulable" in text and "untolerated taint" in text

        # Uncordoning is a cluster change: a waiting pod is retried and goes there.
        scratch.core.patch_node(cordoned, {"spec": {"unschedulable": False}})
        bound = wait_for(lambda: (b := scratch.bound()) and len(b) == 2 and b, "second bound")
        assert sorted(bound.values()) == sorted([good, cordoned])
        assert tainted not in bound.values()


def test_a_deleted_node_is_not_chosen(
    local_cluster: LocalCluster, scratch: Scratch, tmp_path: Path
) -> None:
    gone = scratch.add_node("gone")
    wait_for(scratch.nodes_ready, "scratch node Ready")
    scratch.create_pods([scratch.pod("probe", gpus=1)])
    with processes() as procs:
        procs.append(SchedulerProcess(local_cluster.kubeconfig, scratch, tmp_path, "one"))
        # The scheduler has seen the node once it has bound a pod there.
        assert wait_for(lambda: scratch.bound().get("probe"), "the probe bound") == gone
        scratch.core.delete_node(gone)
        wait_for(lambda: _node_gone(scratch, gone), "the node deleted")
        scratch.create_pods([scratch.pod("late", gpus=1)])
        # Its last watched state was schedulable with 7 GPUs free: it must not be chosen.
        wait_for(lambda: _unschedulable(scratch, {"late"}), "late unschedulable")
        assert "late" not in scratch.bound()

        here = scratch.add_node("here")
        assert wait_for(lambda: scratch.bound().get("late"), "late bound") == here


def test_killed_mid_run_then_restarted_binds_nothing_twice_and_finishes(
    local_cluster: LocalCluster, scratch: Scratch, tmp_path: Path
) -> None:
    for leaf in ("leaf-a", "leaf-b"):
        for i in range(6):
            scratch.add_node(f"{leaf}-{i}", leaf=leaf)
    wait_for(scratch.nodes_ready, "scratch nodes Ready")
    # 24 pods of 4 GPUs fill both leaves (12 each) exactly: in queue order, best fit packs
    # them whole (6+6 | 4+4+2+2).
    sizes = {"g0": 6, "g1": 6, "g2": 4, "g3": 4, "g4": 2, "g5": 2}
    total = scratch.create_gangs(sizes, gpus=4)
    with processes() as procs:
        # Slow on purpose (3 binds a second) so that it dies in the middle.
        first = SchedulerProcess(local_cluster.kubeconfig, scratch, tmp_path, "first",
                                 "--client-qps", "3", "--client-burst", "1")
        procs.append(first)
        wait_for(lambda: len(scratch.bound()) >= 5, "some pods bound", 120)
        first.kill(signal.SIGKILL)
        time.sleep(1)  # a bind already on the wire may still land: count after it has
        before = scratch.bound()
        assert 0 < len(before) < total

        second = SchedulerProcess(local_cluster.kubeconfig, scratch, tmp_path, "second")
        procs.append(second)
        after = wait_for(lambda: (b := scratch.bound()) and len(b) == total and b,
                         "every pod bound", 120)
        # The API shows a bind before the scheduler has counted its answer: wait for the
        # count it must reach rather than read it once.
        counted = "trainmaster_scheduler_bound_pods_total"
        metrics = wait_for(lambda: (m := second.metrics()).get(counted) == total - len(before)
                           and m, "the second scheduler's bound count")
        # Nothing bound before the kill was bound again, nor moved.
        assert {k: after[k] for k in before} == before
        assert metrics.get('trainmaster_scheduler_bind_requests_total{result="taken"}', 0) == 0
        # Every gang whole in one leaf (a gang cut by the kill was finished in its leaf),
        # and no node holds more than its 8 GPUs (2 pods of 4).
        for gang in sizes:
            leaves = {scratch.leaf_of(n) for p, n in after.items() if p.startswith(f"{gang}-")}
            assert len(leaves) == 1, (gang, leaves)
        assert max(Counter(after.values()).values()) <= 2


def test_two_replicas_elect_one_leader_and_the_standby_takes_over(
    local_cluster: LocalCluster, scratch: Scratch, tmp_path: Path
) -> None:
    scratch.add_node("a")
    scratch.add_node("b")
    wait_for(scratch.nodes_ready, "scratch nodes Ready")
    coord = client.CoordinationV1Api(scratch.api_client)

    def holder() -> str:
        try:
            lease = coord.read_namespaced_lease(scratch.scheduler, scratch.namespace)
        except client.ApiException:
            return ""
        return str(lease.spec.holder_identity or "")

    with processes() as procs:
        replicas = {name: SchedulerProcess(local_cluster.kubeconfig, scratch, tmp_path, name)
                    for name in ("r1", "r2")}
        procs.extend(replicas.values())
        leader = wait_for(holder, "a lease holder")
        standby = "r2" if leader == "r1" else "r1"
        gauge = "trainmaster_scheduler_leader"
        wait_for(lambda: replicas[leader].metrics().get(gauge) == 1, "leader gauge")
        # The standby may still be starting on a loaded machine: wait for its endpoint.
        wait_for(lambda: replicas[standby].metrics().get(gauge) == 0, "standby gauge")

        scratch.create_pods([scratch.pod("before", gpus=8)])
        wait_for(lambda: "before" in scratch.bound(), "bound by the leader")
        bound_metric = "trainmaster_scheduler_bound_pods_total"
        # The pod shows bound as soon as the API server has it; the counter follows
        # when the replica has read the answer (later, on a loaded machine).
        wait_for(lambda: replicas[leader].metrics().get(bound_metric) == 1, "bound count 1")
        assert replicas[standby].metrics()[bound_metric] == 0

        replicas[leader].kill(signal.SIGKILL)
        wait_for(lambda: holder() == standby, "the standby to take the lease", 60)
        scratch.create_pods([scratch.pod("after", gpus=8)])
        wait_for(lambda: "after" in scratch.bound(), "bound by the new leader")
        wait_for(lambda: replicas[standby].metrics().get(bound_metric) == 1, "bound count 1")
        assert replicas[standby].alive()
