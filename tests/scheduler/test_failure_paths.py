"""The scheduler's failure paths on a real control plane (etcd, kube-apiserver,
kube-controller-manager, kwok), not on the in-memory API of ``apifake``:

* a bind refused in the middle of a gang (a ValidatingAdmissionPolicy on
  ``pods/binding``): the gang is undone and bound whole once the refusal is lifted;
* the API server restarted (its real process stopped and started again) while the
  scheduler binds: the scheduler retries, re-watches and binds everything exactly once;
* a late Unschedulable report racing a bind: a bound pod never ends with
  ``PodScheduled=False``.

The module brings its own small cluster (one spine, one leaf, one spec node, no
kube-scheduler): restarting an API server must not disturb the session cluster other tests
share. Each test adds its own tainted kwok nodes (``Scratch``). Nothing asserts timing.
"""

from __future__ import annotations

import contextlib
import time
from collections import Counter
from collections.abc import Callable, Iterator
from functools import partial
from pathlib import Path
from typing import Any

import pytest
from kubernetes import client

from tests.conftest import LocalCluster
from tests.helpers import small_spec_doc, write_spec
from tests.scheduler.live import (
    TEST_LABEL,
    SchedulerProcess,
    Scratch,
    processes,
    scratch_box,
    wait_for,
)

pytestmark = pytest.mark.integration

ADMISSION = ("admissionregistration.k8s.io", "v1")
BOUND = "trainmaster_scheduler_bound_pods_total"
TAKEN = 'trainmaster_scheduler_bind_requests_total{result="taken"}'
FAILED = 'trainmaster_scheduler_bind_requests_total{result="failed"}'
UNDONE = "trainmaster_scheduler_gang_undo_pods_total"
UNSCHEDULABLE = 'trainmaster_scheduler_schedule_attempts_total{result="unschedulable"}'


@pytest.fixture(scope="module")
def small_cluster(trainmaster_home: Path,
                  tmp_path_factory: pytest.TempPathFactory) -> Iterator[LocalCluster]:
    from trainmaster import cluster

    spec = write_spec(tmp_path_factory.mktemp("failpaths") / "cluster.yaml",
                      small_spec_doc("failpaths", leaves=1, nodes_per_leaf=1))
    result = cluster.up(spec, kube_scheduler=False)
    state_dir = Path(result.record.state_dir)
    try:
        yield LocalCluster(Path(result.record.kubeconfig), state_dir, spec, result.record.nodes)
    finally:
        cluster.down_state_dir(state_dir)


@pytest.fixture()
def scratch(small_cluster: LocalCluster) -> Iterator[Scratch]:
    """This module's own cluster, not the shared one (it restarts the API server)."""
    with scratch_box(small_cluster.kubeconfig) as box:
        yield box


def _live_bound(scratch: Scratch) -> dict[str, str]:
    """Bound pods that are not being deleted (an undone member is deleted, not unbound)."""
    return {p.metadata.name: p.spec.node_name for p in scratch.pods()
            if p.spec.node_name and p.metadata.deletion_timestamp is None}


def _job(scratch: Scratch, name: str, size: int, gpus: int = 8) -> dict[str, Any]:
    """A Job whose pods form one gang: a controller that recreates what the undo deletes."""
    pod = scratch.pod("unused", gpus=gpus, group=name)
    pod["spec"]["restartPolicy"] = "Never"
    return {
        "apiVersion": "batch/v1", "kind": "Job", "metadata": {"name": name},
        "spec": {"parallelism": size, "completions": size, "backoffLimit": 1000,
                 "template": {"metadata": {"labels": pod["metadata"]["labels"]},
                              "spec": pod["spec"]}},
    }


class DenyBindsTo:
    """A ValidatingAdmissionPolicy (and its binding) that refuses every Binding to one node:
    the API server answers the scheduler's bind with 422 (Invalid), as a webhook would."""

    def __init__(self, scratch: Scratch, node: str) -> None:
        self.custom = scratch.custom
        self.name = f"{scratch.namespace}-deny-binds"
        self.custom.create_cluster_custom_object(*ADMISSION, "validatingadmissionpolicies", {
            "apiVersion": "admissionregistration.k8s.io/v1",
            "kind": "ValidatingAdmissionPolicy",
            "metadata": {"name": self.name},
            "spec": {
                "failurePolicy": "Fail",
                "matchConstraints": {
                    "namespaceSelector": {"matchLabels": {
                        "kubernetes.io/metadata.name": scratch.namespace}},
                    "resourceRules": [{"apiGroups": [""], "apiVersions": ["v1"],
                                       "operations": ["CREATE"],
                                       "resources": ["pods/binding"]}]},
                "validations": [{"expression": f"object.target.name != '{node}'",
                                 "message": f"node {node} refuses binds (test policy)"}],
            },
        })
        self.custom.create_cluster_custom_object(
            *ADMISSION, "validatingadmissionpolicybindings", {
                "apiVersion": "admissionregistration.k8s.io/v1",
                "kind": "ValidatingAdmissionPolicyBinding",
                "metadata": {"name": self.name},
                "spec": {"policyName": self.name, "validationActions": ["Deny"]},
            })

    def remove(self) -> None:
        for plural in ("validatingadmissionpolicybindings", "validatingadmissionpolicies"):
            with contextlib.suppress(client.ApiException):
                self.custom.delete_cluster_custom_object(*ADMISSION, plural, self.name)


def _bind(scratch: Scratch, pod: str, node: str) -> int:
    """POST a Binding by hand; the HTTP status (201 bound, 4xx refused)."""
    try:
        scratch.core.create_namespaced_pod_binding(
            pod, scratch.namespace,
            {"apiVersion": "v1", "kind": "Binding", "metadata": {"name": pod},
             "target": {"apiVersion": "v1", "kind": "Node", "name": node}},
            _preload_content=False)
    except client.ApiException as err:
        return int(err.status)
    return 201


def test_bind_refused_mid_gang_is_undone_then_the_gang_binds_whole(
    small_cluster: LocalCluster, scratch: Scratch, tmp_path: Path
) -> None:
    nodes = [scratch.add_node(f"n{i}") for i in range(3)]
    refusing = nodes[1]
    wait_for(scratch.nodes_ready, "scratch nodes Ready")
    policy = DenyBindsTo(scratch, refusing)
    try:
        # The policy is live once the API server refuses a bind to that node by hand
        # (a probe pod nobody schedules: its schedulerName is not ours).
        probe = scratch.pod("probe", gpus=0)
        probe["spec"]["schedulerName"] = "nobody"
        scratch.create_pods([probe])
        wait_for(lambda: _bind(scratch, "probe", refusing) == 422, "the policy to refuse", 60)
        scratch.core.delete_namespaced_pod("probe", scratch.namespace, grace_period_seconds=0)

        # 3 pods of 8 GPUs on exactly 3 nodes of 8: the gang needs the refusing node.
        scratch.create_group("gang", 3)
        client.BatchV1Api(scratch.api_client).create_namespaced_job(
            scratch.namespace, _job(scratch, "gang", 3))
        with processes() as procs:
            sched = SchedulerProcess(small_cluster.kubeconfig, scratch, tmp_path, "one")
            procs.append(sched)
            # Two attempts, each undone: the members it bound were deleted (the Job
            # recreates them) and never more than the gang's pods sit bound at once.
            seen: list[int] = []

            def undone_twice() -> bool:
                seen.append(len(_live_bound(scratch)))
                return sched.metrics().get(UNDONE, 0) >= 4

            wait_for(undone_twice, "two undone attempts", 120)
            metrics = sched.metrics()
            assert metrics.get(FAILED, 0) >= 2  # the refused member, once per attempt
            assert metrics.get(TAKEN, 0) == 0
            assert max(seen) <= 2  # the refused third member was never bound
            assert refusing not in _live_bound(scratch).values()
            events = scratch.core.list_namespaced_event(scratch.namespace).items
            assert any(e.reason == "SuccessfulCreate" and e.involved_object.kind == "Job"
                       for e in events)

            policy.remove()  # the node accepts binds again: the gang binds, whole
            bound = wait_for(lambda: (b := _live_bound(scratch)) and len(b) == 3 and b,
                             "the gang bound whole", 120)
            assert sorted(bound.values()) == sorted(nodes)
            time.sleep(2)  # anything still in flight lands: still exactly one gang
            assert len(_live_bound(scratch)) == 3
            assert sched.metrics().get(TAKEN, 0) == 0
    finally:
        policy.remove()


def _restart_apiserver(state_dir: Path, down: float = 2.0,
                       while_down: Callable[[], None] | None = None) -> None:
    """Stop the cluster's kube-apiserver process and start it again with the same command
    line and log, then record the new pid (so that ``cluster down`` stops it). It stays
    down ``down`` seconds (long enough that every client sees refused connections), and
    ``while_down`` runs meanwhile."""
    from trainmaster.cluster import _processes as procs
    from trainmaster.cluster._state import ClusterRecord

    record = ClusterRecord.load(state_dir)
    assert record is not None
    entry = next(p for p in record.processes if p.name == "kube-apiserver")
    argv = Path(f"/proc/{entry.pid}/cmdline").read_bytes().rstrip(b"\0").split(b"\0")
    procs.stop(entry.pid)
    deadline = time.monotonic() + down
    if while_down is not None:
        while_down()
    time.sleep(max(0.0, deadline - time.monotonic()))
    proc = procs.start("kube-apiserver", [a.decode() for a in argv], Path(entry.log))
    entry.pid = proc.pid
    record.save()


def _api_ready(scratch: Scratch) -> bool:
    try:
        scratch.core.list_namespace(limit=1)
        return True
    except Exception:  # connection refused while it starts
        return False


def test_scheduler_recovers_after_the_api_server_restarts(
    small_cluster: LocalCluster, scratch: Scratch, tmp_path: Path
) -> None:
    for i in range(6):
        scratch.add_node(f"a{i}", leaf="leaf-a")
    for i in range(6):
        scratch.add_node(f"b{i}", leaf="leaf-b")
    wait_for(scratch.nodes_ready, "scratch nodes Ready")
    # 24 pods of 4 GPUs fill both leaves exactly, in gangs of 6, 6, 4, 4, 2, 2.
    sizes = {"g0": 6, "g1": 6, "g2": 4, "g3": 4, "g4": 2, "g5": 2}
    total = scratch.create_gangs(sizes, gpus=4)
    with processes() as procs:
        # Slow binds (4 a second) so that the restart lands in the middle of them. The
        # lease outlasts the outage (a restart takes 10-30 s on this shared machine): this
        # test is about retrying, not failover (a replica that loses its lease exits and
        # its Deployment restarts it; test_live covers the standby taking over).
        sched = SchedulerProcess(small_cluster.kubeconfig, scratch, tmp_path, "one",
                                 "--client-qps", "4", "--client-burst", "1",
                                 "--lease-duration", "120", "--renew-deadline", "100")
        procs.append(sched)
        wait_for(lambda: len(scratch.bound()) >= 3, "some pods bound", 120)
        before = scratch.bound()
        _restart_apiserver(small_cluster.state_dir)
        assert len(before) < total, "the restart came too late: everything was bound"
        wait_for(lambda: _api_ready(scratch), "the API server back", 120)
        assert sched.alive()

        after = wait_for(lambda: (b := scratch.bound()) and len(b) == total and b,
                         "every pod bound after the restart", 180)
        assert sched.alive()
        assert {k: after[k] for k in before} == before  # nothing moved
        for gang in sizes:  # every gang whole in one leaf
            leaves = {scratch.leaf_of(n) for p, n in after.items() if p.startswith(f"{gang}-")}
            assert len(leaves) == 1, (gang, leaves)
        assert max(Counter(after.values()).values()) <= 2  # no node over its 8 GPUs
        metrics = wait_for(lambda: (m := sched.metrics()).get(BOUND) == total and m,
                           "bound count", 60)
        assert metrics.get(TAKEN, 0) == 0

        # The watches came back too: a pod created after the restart is bound.
        scratch.add_node("c0", leaf="leaf-c")
        wait_for(scratch.nodes_ready, "the new node Ready")
        scratch.create_pods([scratch.pod("after", gpus=8)])
        wait_for(lambda: "after" in scratch.bound(), "a new pod bound after the restart", 120)


def _scheduled_condition(pod: client.V1Pod) -> tuple[str, str]:
    cond = next((c for c in pod.status.conditions or [] if c.type == "PodScheduled"), None)
    return (cond.status, cond.reason or "") if cond is not None else ("", "")


def _judged_after(sched: SchedulerProcess, baseline: float) -> bool:
    return sched.metrics().get(UNSCHEDULABLE, 0) > baseline


def _all_bound(scratch: Scratch, names: list[str]) -> bool:
    bound = scratch.bound()
    return all(n in bound for n in names)


def test_a_late_unschedulable_report_never_overwrites_a_bind(
    small_cluster: LocalCluster, scratch: Scratch, tmp_path: Path
) -> None:
    rounds = 4
    with processes() as procs:
        # One write a second for binds and reports alike: the reports of a gang that did
        # not fit are still queued (or on the wire) when the capacity arrives and the
        # gang's binds go out right behind them.
        sched = SchedulerProcess(small_cluster.kubeconfig, scratch, tmp_path, "one",
                                 "--client-qps", "1", "--client-burst", "1")
        procs.append(sched)
        for r in range(rounds):
            names = [f"r{r}-{i}" for i in range(2)]
            baseline = wait_for(lambda: (m := sched.metrics()) and m, "metrics").get(
                UNSCHEDULABLE, 0)
            scratch.create_group(f"r{r}", 2)
            scratch.create_pods([scratch.pod(n, gpus=8, group=f"r{r}") for n in names])
            # No room: the scheduler decides Unschedulable and queues its reports ...
            wait_for(partial(_judged_after, sched, baseline), f"round {r} judged unschedulable",
                     60)
            # ... and at once the room appears; the binds race the queued reports.
            scratch.add_node(f"r{r}-a")
            scratch.add_node(f"r{r}-b")
            wait_for(partial(_all_bound, scratch, names), f"round {r} bound", 120)
        # Longer than the report interval (5 s): a periodic re-report would have come.
        time.sleep(7)
        pods = {p.metadata.name: p for p in scratch.pods()}
        assert len(pods) == 2 * rounds
        for name, pod in pods.items():
            assert pod.spec.node_name, name
            assert _scheduled_condition(pod)[0] == "True", (name, _scheduled_condition(pod))
        assert sched.metrics().get(TAKEN, 0) == 0
        assert sched.metrics()[BOUND] == 2 * rounds
        events = scratch.core.list_namespaced_event(scratch.namespace).items
        judged = {e.involved_object.name for e in events if e.reason == "FailedScheduling"}
        assert judged == {f"r{r}" for r in range(rounds)}  # every round was reported first
        assert not [p for p in pods.values() if TEST_LABEL not in (p.spec.node_selector or {})]


def test_lease_lost_in_an_outage_longer_than_the_lease_exits_and_a_new_leader_binds(
    small_cluster: LocalCluster, scratch: Scratch, tmp_path: Path
) -> None:
    """The API server is down longer than the renew deadline (8 s of ``SchedulerProcess``):
    the leader cannot renew, so it must stop and exit with code 1 (EXIT_LOST_LEASE, its
    Deployment restarts it as a standby), not hang. Without a leader nothing is bound; a
    new replica takes the lease over and binds what is pending."""
    from trainmaster.scheduler.runtime.service import EXIT_LOST_LEASE

    scratch.add_node("l0")
    wait_for(scratch.nodes_ready, "scratch nodes Ready")
    with processes() as procs:
        # Two writes a second: binds are still in flight (and their reports queued)
        # when the lease runs out, as in the hang this guards against (the end of the
        # cancelled binds woke the report writers as they were being cancelled).
        one = SchedulerProcess(small_cluster.kubeconfig, scratch, tmp_path, "one",
                               "--client-qps", "2", "--client-burst", "1")
        procs.append(one)
        scratch.create_pods([scratch.pod("before", gpus=8)])
        wait_for(lambda: "before" in scratch.bound(), "a pod bound by the leader", 120)
        scratch.create_pods([scratch.pod(f"burst-{i}", gpus=0) for i in range(40)])
        wait_for(lambda: any(p.startswith("burst-") for p in scratch.bound()),
                 "the burst's binds under way", 60)
        # Down for 25 s, three times the renew deadline.
        _restart_apiserver(small_cluster.state_dir, down=25)
        wait_for(lambda: _api_ready(scratch), "the API server back", 120)
        # It exits on its own, with the documented code (a bound, not a timing claim:
        # the hang this guards against lasted minutes).
        wait_for(lambda: not one.alive(), "the leader that lost its lease to exit", 60)
        text = one.log.read_text()
        assert one.proc.returncode == EXIT_LOST_LEASE, text[-3000:]
        assert "lost the lease" in text

        # With no leader, a pod created now stays unbound; a new replica takes over.
        scratch.create_pods([scratch.pod("after", gpus=0)])
        time.sleep(3)
        assert "after" not in scratch.bound()
        two = SchedulerProcess(small_cluster.kubeconfig, scratch, tmp_path, "two")
        procs.append(two)
        wait_for(lambda: "after" in scratch.bound(), "a pod bound by the new leader", 120)
        assert two.alive()
        assert "before" in scratch.bound()
