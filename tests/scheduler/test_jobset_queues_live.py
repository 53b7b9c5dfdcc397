"""trainmaster-scheduler's queue rules apply to a JobSet's gang as to a TrainingJob's, on
the real local control plane with the real JobSet controller (built from its pinned
release) and the scheduler as a subprocess.

The queue is the JobSet's `kueue.x-k8s.io/queue-name` label: outside a LocalQueue
namespace it names the queue itself; in one (`localQueueNamespaces`) it names a
trainmaster.io LocalQueue of the namespace whose `clusterQueue` is the queue. Queue
`small` holds 32 GPUs; each JobSet is 2 Jobs x 2 pods x 8 GPUs (32 GPUs), each Job under
its own leaf, on 8 kwok nodes of 8 GPUs in 2 leaves. The first JobSet binds; the second,
over the quota, binds nothing and its pods and the JobSet's Event carry the scheduler's
reason (the queue and its usage) until the first is deleted and its quota comes back.

Preemption: a high-priority JobSet that finds no leaf preempts a low-priority JobSet's
gang whole (every pod of it), with a Preempted Event on the low JobSet, and is bound.

Fair sharing: queues `alpha` and `beta` hold nothing of their own in cohort `lab` (32
GPUs, fair sharing on, equal weights), so everything either runs is borrowed. Two JobSets
of beta (one Job x 2 pods x 8 GPUs each, 16 GPUs) fill the cohort, share 32/32 = 1.0. A
JobSet of alpha of the same size would have share 16/32 = 0.5, at most beta's 16/32 = 0.5
after losing one (Kueue's LessThanOrEqualToFinalShare): exactly one of beta's JobSets is
preempted whole, its Preempted Event says fair sharing decided, and alpha's JobSet is
bound where it was. All three JobSets have the same priority: only fair sharing lets one
evict another."""

from __future__ import annotations

import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
import yaml
from kubernetes import client

from tests.conftest import LocalCluster
from tests.scheduler.live import (
    TEST_LABEL,
    SchedulerProcess,
    Scratch,
    add_ready_nodes,
    ensure_crd,
    processes,
    scratch_box,
    wait_for,
)
from tests.scheduler.test_interop_live import (
    JOBSETS,
    bound,
    create_jobset,
    jobs_by_leaf,
    jobset_pods,
)
from tests.scheduler.test_queues_live import priority_classes
from trainmaster.api import QUEUE_LABEL
from trainmaster.cluster import Controller, running_controller
from trainmaster.objects._crds import localqueue_crd
from trainmaster.toolchain import build

pytestmark = pytest.mark.integration

LOCALQUEUES = ("trainmaster.io", "v1alpha1", "localqueues")


@pytest.fixture(scope="module")
def jobset_controller(local_cluster: LocalCluster) -> Iterator[Controller]:
    build(["jobset"])  # cached after the first build
    with running_controller(local_cluster.state_dir, "jobset") as controller:
        yield controller


def jobset(scratch: Scratch, name: str, queue_label: str | None, jobs: int = 2,
           priority_class: str | None = None) -> dict[str, Any]:
    pod: dict[str, Any] = {"schedulerName": scratch.scheduler, "restartPolicy": "Never",
           "terminationGracePeriodSeconds": 0, "nodeSelector": {TEST_LABEL: scratch.tag},
           "tolerations": [{"key": TEST_LABEL, "operator": "Exists"}],
           "containers": [{"name": "trainer", "image": "busybox:1.36", "resources": {
               "requests": {"nvidia.com/gpu": "8"}, "limits": {"nvidia.com/gpu": "8"}}}]}
    if priority_class:
        pod["priorityClassName"] = priority_class
    return {
        "apiVersion": "jobset.x-k8s.io/v1alpha2", "kind": "JobSet",
        "metadata": {"name": name, "namespace": scratch.namespace,
                     "labels": {QUEUE_LABEL: queue_label} if queue_label else {},
                     "annotations": {"alpha.jobset.sigs.k8s.io/exclusive-topology":
                                     "topology.trainmaster.io/leaf"}},
        "spec": {"replicatedJobs": [{"name": "workers", "replicas": jobs, "template": {"spec": {
            "parallelism": 2, "completions": 2, "backoffLimit": 0,
            "template": {"spec": pod}}}}]},
    }


def told(scratch: Scratch, name: str, words: str) -> str | None:
    """A message of the JobSet's pods' PodScheduled condition holding ``words``."""
    for pod in jobset_pods(scratch, name):
        for cond in pod.status.conditions or []:
            if cond.type == "PodScheduled" and words in (cond.message or ""):
                return str(cond.message)
    return None


@pytest.mark.parametrize("through", ["queue-label", "local-queue"])
def test_a_jobset_gang_over_its_queues_quota_waits_until_the_quota_frees(
        local_cluster: LocalCluster, jobset_controller: Controller, tmp_path: Path,
        through: str) -> None:
    with scratch_box(local_cluster.kubeconfig) as scratch, processes() as procs:
        add_ready_nodes(scratch, [(f"{leaf}{n}", f"leaf-{leaf}")
                                  for leaf in "ab" for n in range(4)])
        config: dict[str, Any] = {"queues": [{"name": "small", "nominalQuota": 32}]}
        label = "small"
        if through == "local-queue":
            ensure_crd(scratch.api_client, localqueue_crd(), LOCALQUEUES, "LocalQueue")
            config["localQueueNamespaces"] = [scratch.namespace]
            label = "team"
            scratch.custom.create_namespaced_custom_object(
                *LOCALQUEUES[:2], scratch.namespace, LOCALQUEUES[2],
                {"apiVersion": "trainmaster.io/v1alpha1", "kind": "LocalQueue",
                 "metadata": {"name": "team"}, "spec": {"clusterQueue": "small"}})
        path = tmp_path / "config.yaml"
        path.write_text(yaml.safe_dump(config))
        procs.append(SchedulerProcess(local_cluster.kubeconfig, scratch, tmp_path, "a",
                                      "--config", str(path)))

        create_jobset(scratch, jobset(scratch, "first", label))
        wait_for(lambda: bound(scratch, "first") == 4, "the first JobSet bound", 180)
        by_job = jobs_by_leaf(scratch, "first")
        assert sorted(by_job) == ["0", "1"] and by_job["0"] != by_job["1"], by_job

        create_jobset(scratch, jobset(scratch, "second", label))
        wait_for(lambda: len(jobset_pods(scratch, "second")) == 4, "the second's pods", 120)
        message = wait_for(lambda: told(scratch, "second", "queue small"),
                           "the second JobSet's pods told the queue is full", 120)
        assert "32/32" in message, message
        events = client.CoreV1Api(scratch.api_client).list_namespaced_event(
            scratch.namespace, field_selector="involvedObject.kind=JobSet").items
        assert any(e.reason == "FailedScheduling" and e.involved_object.name == "second"
                   and "queue small" in (e.message or "") for e in events), \
            [(e.reason, e.involved_object.name, e.message) for e in events]
        time.sleep(3)  # a few more cycles: nothing of it bound (there is room on the nodes)
        assert bound(scratch, "second") == 0

        scratch.custom.delete_namespaced_custom_object(
            *JOBSETS[:2], scratch.namespace, JOBSETS[2], "first",
            propagation_policy="Foreground")
        wait_for(lambda: bound(scratch, "second") == 4,
                 "the second JobSet bound once the first's quota is back", 180)
        by_job = jobs_by_leaf(scratch, "second")
        assert all(len(leaves) == 1 for leaves in by_job.values()), by_job


def test_a_high_priority_jobset_preempts_a_low_one_whole(
        local_cluster: LocalCluster, jobset_controller: Controller, tmp_path: Path) -> None:
    with scratch_box(local_cluster.kubeconfig) as scratch, processes() as procs, \
            priority_classes(scratch, {"low": 10, "high": 1000}) as pc:
        # one leaf of 2 nodes: a JobSet of one Job of 2 pods x 8 GPUs fills it
        add_ready_nodes(scratch, [(f"a{n}", "leaf-a") for n in range(2)])
        path = tmp_path / "config.yaml"
        path.write_text(yaml.safe_dump({"queues": [], "preemption": True}))
        procs.append(SchedulerProcess(local_cluster.kubeconfig, scratch, tmp_path, "a",
                                      "--config", str(path)))
        create_jobset(scratch, jobset(scratch, "low", None, jobs=1, priority_class=pc["low"]))
        wait_for(lambda: bound(scratch, "low") == 2, "the low JobSet bound", 180)
        low_uids = {p.metadata.uid for p in jobset_pods(scratch, "low")}

        create_jobset(scratch, jobset(scratch, "high", None, jobs=1,
                                      priority_class=pc["high"]))
        wait_for(lambda: bound(scratch, "high") == 2, "the high JobSet bound", 180)
        alive = {p.metadata.uid for p in jobset_pods(scratch, "low")
                 if p.metadata.deletion_timestamp is None}
        assert not low_uids & alive, "every pod of the low JobSet's gang was evicted"
        events = client.CoreV1Api(scratch.api_client).list_namespaced_event(
            scratch.namespace, field_selector="involvedObject.kind=JobSet").items
        assert any(e.reason == "Preempted" and e.involved_object.name == "low"
                   for e in events), [(e.reason, e.involved_object.name) for e in events]


def test_fair_sharing_gives_a_jobset_of_the_lower_share_queue_its_share(
        local_cluster: LocalCluster, jobset_controller: Controller, tmp_path: Path) -> None:
    with scratch_box(local_cluster.kubeconfig) as scratch, processes() as procs:
        # two leaves of 2 nodes x 8 GPUs: a JobSet of one Job of 2 pods fills a leaf
        add_ready_nodes(scratch, [(f"{leaf}{n}", f"leaf-{leaf}")
                                  for leaf in "ab" for n in range(2)])
        path = tmp_path / "config.yaml"
        path.write_text(yaml.safe_dump({
            "preemption": True,
            "queues": [{"name": "alpha", "nominalQuota": 0, "cohort": "lab"},
                       {"name": "beta", "nominalQuota": 0, "cohort": "lab"}],
            "cohorts": [{"name": "lab", "resources": [{"name": "nvidia.com/gpu",
                                                       "nominalQuota": 32}]}],
            "fairSharing": {"enable": True},
        }))
        procs.append(SchedulerProcess(local_cluster.kubeconfig, scratch, tmp_path, "a",
                                      "--config", str(path)))
        gauge = 'trainmaster_scheduler_queue_gpus_in_use{{queue="{}"}}'

        betas = ("b0", "b1")
        for name in betas:
            create_jobset(scratch, jobset(scratch, name, "beta", jobs=1))
        wait_for(lambda: all(bound(scratch, name) == 2 for name in betas),
                 "beta's two JobSets bound (the whole cohort, borrowed)", 180)
        before = {name: {p.metadata.uid for p in jobset_pods(scratch, name)}
                  for name in betas}
        wait_for(lambda: procs[0].metrics().get(gauge.format("beta")) == 32,
                 "beta charged 32 GPUs", 120)

        create_jobset(scratch, jobset(scratch, "a0", "alpha", jobs=1))
        wait_for(lambda: bound(scratch, "a0") == 2, "alpha's JobSet bound", 180)
        alive = {name: {p.metadata.uid for p in jobset_pods(scratch, name)
                        if p.spec.node_name and p.metadata.deletion_timestamp is None}
                 for name in betas}
        gone = [name for name in betas if not before[name] & alive[name]]
        assert len(gone) == 1, (before, alive)  # exactly one of beta's JobSets, whole
        victim = gone[0]
        kept = next(name for name in betas if name != victim)
        assert alive[kept] == before[kept]  # the other untouched
        by_job = jobs_by_leaf(scratch, "a0")
        assert all(len(leaves) == 1 for leaves in by_job.values()), by_job

        def preempted() -> list[Any] | None:
            events = client.CoreV1Api(scratch.api_client).list_namespaced_event(
                scratch.namespace, field_selector="involvedObject.kind=JobSet").items
            return [e for e in events if e.reason == "Preempted"] or None

        events = wait_for(preempted, "the Preempted Event on beta's JobSet", 120)
        assert [e.involved_object.name for e in events] == [victim], \
            [(e.involved_object.name, e.message) for e in events]
        message = events[0].message
        assert f"preempted by {scratch.namespace}/jobset:a0" in message, message
        # beta's share before the eviction: 32/32
        assert "queue alpha, fair sharing, its side's share 1)" in message, message
        # The victim's Jobs make new pods; they wait: beta is above its share now.
        wait_for(lambda: procs[0].metrics().get(gauge.format("alpha")) == 16
                 and procs[0].metrics().get(gauge.format("beta")) == 16,
                 "alpha charged 16 GPUs, beta 16", 120)
        time.sleep(3)
        assert bound(scratch, kept) == 2
