"""docs/interop.md's JobSet and Kueue paths, on the real local control plane, with the
page's YAML as it is printed. Only what must differ on a shared test cluster is
substituted: the namespace, the scheduler's name, the test nodes' selector and toleration,
the cluster-scoped Kueue objects' names (tagged), and the ClusterQueue's namespaceSelector
(this test's namespace only).

The controllers are the real ones, built from their pinned releases and run with their
CRDs, their own identities and their webhooks on loopback (trainmaster/cluster/
_workload_apis.py); the scheduler is the real trainmaster-scheduler.

* JobSet: 16 kwok nodes of 8 GPUs in 4 leaves; the page's JobSet (4 Jobs x 4 pods x 8 GPUs)
  fills them, one Job per leaf. One node is cordoned first: three Jobs would fit, the
  fourth would not, and nothing of the JobSet is bound (its pods are told which Job found
  no leaf). Uncordoned, all 16 pods bind, each Job's four in one leaf, four leaves.
* JobSet through the upstream API: the page's Workload (a composite template: the whole
  under one spine, every Job needed; a child template: one Job's 4 pods under one leaf),
  its 4 PodGroups and a JobSet of 4 replicated Jobs whose pods name them. The same nodes,
  the same cordon: nothing bound and the PodGroups told why; uncordoned, 16 pods bound,
  each Job in one leaf, every PodGroup PodGroupInitiallyScheduled=True.
* Kueue: the page's ClusterQueue (16 GPUs), LocalQueue `team` and suspended JobSet (2 Jobs x
  2 pods x 4 GPUs). Kueue admits it (unsuspends it) and trainmaster-scheduler, with no
  queues of its own, places the gang, each Job in its own leaf. A second such JobSet stays
  suspended in Kueue, with no pod at all, until the first is deleted.
"""

from __future__ import annotations

import contextlib
import copy
import re
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
import yaml
from kubernetes import client

from tests.conftest import LocalCluster
from tests.helpers import ROOT
from tests.scheduler.live import (
    TEST_LABEL,
    SchedulerProcess,
    Scratch,
    add_ready_nodes,
    processes,
    scratch_box,
    wait_for,
)
from trainmaster.cluster import Controller, running_controller
from trainmaster.toolchain import build

pytestmark = pytest.mark.integration

PAGE = ROOT / "docs" / "interop.md"
JOBSETS = ("jobset.x-k8s.io", "v1alpha2", "jobsets")
KUEUE = ("kueue.x-k8s.io", "v1beta2")
KUEUE_PLURALS = {"ResourceFlavor": "resourceflavors", "ClusterQueue": "clusterqueues",
                 "LocalQueue": "localqueues"}
JOBSET_NAME = "jobset.sigs.k8s.io/jobset-name"


def page_block(kinds: set[str]) -> list[dict[str, Any]]:
    """The page's YAML block holding exactly these kinds."""
    for block in re.findall(r"^```yaml\n(.*?)^```", PAGE.read_text(), re.S | re.M):
        docs = [d for d in yaml.safe_load_all(block) if d]
        if {d["kind"] for d in docs} == kinds:
            return docs
    raise AssertionError(f"{PAGE}: no YAML block of exactly {sorted(kinds)}")


@pytest.fixture(scope="module")
def jobset_controller(local_cluster: LocalCluster) -> Iterator[Controller]:
    build(["jobset"])  # from its pinned release: minutes the first time, cached after
    with running_controller(local_cluster.state_dir, "jobset") as controller:
        yield controller


@pytest.fixture(scope="module")
def kueue_controller(local_cluster: LocalCluster,
                     jobset_controller: Controller) -> Iterator[Controller]:
    # After JobSet's: Kueue manages JobSets only when their CRD is there when it starts.
    build(["kueue"])
    with running_controller(local_cluster.state_dir, "kueue") as controller:
        yield controller


def for_test(jobset: dict[str, Any], scratch: Scratch, name: str | None = None
             ) -> dict[str, Any]:
    """The page's JobSet for this test's namespace, scheduler and nodes."""
    obj = copy.deepcopy(jobset)
    obj["metadata"]["namespace"] = scratch.namespace
    if name:
        obj["metadata"]["name"] = name
    for replicated in obj["spec"]["replicatedJobs"]:
        pod = replicated["template"]["spec"]["template"]["spec"]
        assert pod["schedulerName"] == "trainmaster-scheduler"
        pod["schedulerName"] = scratch.scheduler
        pod["nodeSelector"] = {TEST_LABEL: scratch.tag}
        pod["tolerations"] = [{"key": TEST_LABEL, "operator": "Exists"}]
        pod["terminationGracePeriodSeconds"] = 0
    return obj


def create_jobset(scratch: Scratch, obj: dict[str, Any]) -> None:
    scratch.custom.create_namespaced_custom_object(*JOBSETS[:2], scratch.namespace,
                                                   JOBSETS[2], obj)


def jobset_pods(scratch: Scratch, name: str) -> list[Any]:
    return [p for p in scratch.pods() if (p.metadata.labels or {}).get(JOBSET_NAME) == name]


def bound(scratch: Scratch, name: str) -> int:
    return sum(1 for p in jobset_pods(scratch, name) if p.spec.node_name)


def jobs_by_leaf(scratch: Scratch, name: str) -> dict[str, set[str]]:
    """Job index -> leaves its bound pods are in."""
    out: dict[str, set[str]] = {}
    for pod in jobset_pods(scratch, name):
        if pod.spec.node_name:
            out.setdefault(pod.metadata.labels["jobset.sigs.k8s.io/job-index"], set()).add(
                scratch.leaf_of(pod.spec.node_name))
    return out


def test_the_pages_jobset_lands_job_by_leaf_and_only_whole(
        local_cluster: LocalCluster, jobset_controller: Controller, tmp_path: Path) -> None:
    (jobset,) = page_block({"JobSet"})
    with scratch_box(local_cluster.kubeconfig) as scratch, processes() as procs:
        add_ready_nodes(scratch, [(f"{leaf}{n}", f"leaf-{leaf}")
                                  for leaf in "abcd" for n in range(4)])
        cordoned = scratch.nodes[-1]
        scratch.core.patch_node(cordoned, {"spec": {"unschedulable": True}})
        procs.append(SchedulerProcess(local_cluster.kubeconfig, scratch, tmp_path, "a"))
        name = jobset["metadata"]["name"]
        create_jobset(scratch, for_test(jobset, scratch))

        # Every pod exists, none is bound: the fourth Job finds no whole leaf left.
        wait_for(lambda: len(jobset_pods(scratch, name)) == 16, "the JobSet's 16 pods", 180)

        def told() -> str | None:
            for pod in jobset_pods(scratch, name):
                for cond in pod.status.conditions or []:
                    if cond.type == "PodScheduled" and "fits in no leaf left" in (
                            cond.message or ""):
                        return str(cond.message)
            return None

        message = wait_for(told, "the JobSet's pods told why they wait", 120)
        assert f"jobset:{name}" in message
        time.sleep(3)  # a few more cycles: still nothing of it bound
        assert bound(scratch, name) == 0

        scratch.core.patch_node(cordoned, {"spec": {"unschedulable": False}})
        wait_for(lambda: bound(scratch, name) == 16, "all 16 pods bound", 180)
        by_job = jobs_by_leaf(scratch, name)
        assert sorted(by_job) == ["0", "1", "2", "3"]
        assert all(len(leaves) == 1 for leaves in by_job.values()), by_job
        assert len(set().union(*by_job.values())) == 4, by_job

        events = client.CoreV1Api(scratch.api_client).list_namespaced_event(
            scratch.namespace, field_selector="involvedObject.kind=JobSet").items
        assert any(e.reason == "Scheduled" and "16 pods" in (e.message or "") for e in events)


UPSTREAM = ("scheduling.k8s.io", "v1beta1")
UPSTREAM_PLURALS = {"Workload": "workloads", "PodGroup": "podgroups"}


def upstream_condition(scratch: Scratch, group: str) -> dict[str, Any] | None:
    obj = scratch.custom.get_namespaced_custom_object(*UPSTREAM, scratch.namespace,
                                                      "podgroups", group)
    return next((c for c in (obj.get("status") or {}).get("conditions") or []
                 if c["type"] == "PodGroupInitiallyScheduled"), None)


def test_the_pages_jobset_through_the_upstream_composite_group_lands_job_by_leaf(
        local_cluster: LocalCluster, jobset_controller: Controller, tmp_path: Path) -> None:
    """The same test with the gang expressed through the upstream Workload and PodGroups:
    a composite of one child PodGroup per Job (each under one leaf), all under one spine."""
    docs = page_block({"Workload", "PodGroup", "JobSet"})
    (jobset,) = [d for d in docs if d["kind"] == "JobSet"]
    groups = [d["metadata"]["name"] for d in docs if d["kind"] == "PodGroup"]
    assert len(groups) == 4 and len(jobset["spec"]["replicatedJobs"]) == 4
    with scratch_box(local_cluster.kubeconfig) as scratch, processes() as procs:
        try:
            add_ready_nodes(scratch, [(f"{leaf}{n}", f"leaf-{leaf}")
                                      for leaf in "abcd" for n in range(4)])
            cordoned = scratch.nodes[-1]
            scratch.core.patch_node(cordoned, {"spec": {"unschedulable": True}})
            for doc in docs:
                if doc["kind"] in UPSTREAM_PLURALS:
                    scratch.custom.create_namespaced_custom_object(
                        *UPSTREAM, scratch.namespace, UPSTREAM_PLURALS[doc["kind"]],
                        copy.deepcopy(doc))
            procs.append(SchedulerProcess(local_cluster.kubeconfig, scratch, tmp_path, "a"))
            name = jobset["metadata"]["name"]
            create_jobset(scratch, for_test(jobset, scratch))
            wait_for(lambda: len(jobset_pods(scratch, name)) == 16, "the JobSet's 16 pods",
                     180)
            pod = jobset_pods(scratch, name)[0]
            assert pod.spec.scheduling_group.pod_group_name in groups

            def told() -> str | None:
                cond = upstream_condition(scratch, groups[0])
                if cond and cond["status"] == "False" and "fits in no leaf left" in \
                        cond["message"]:
                    return str(cond["message"])
                return None

            message = wait_for(told, "the Jobs' PodGroups told why they wait", 120)
            assert f"composite:{name}-all" in message, message
            time.sleep(3)  # a few more cycles: still nothing of it bound
            assert bound(scratch, name) == 0

            scratch.core.patch_node(cordoned, {"spec": {"unschedulable": False}})
            wait_for(lambda: bound(scratch, name) == 16, "all 16 pods bound", 180)
            by_job: dict[str, set[str]] = {}
            for pod in jobset_pods(scratch, name):
                by_job.setdefault(pod.metadata.labels["jobset.sigs.k8s.io/replicatedjob-name"],
                                  set()).add(scratch.leaf_of(pod.spec.node_name))
            assert sorted(by_job) == ["job-0", "job-1", "job-2", "job-3"]
            assert all(len(leaves) == 1 for leaves in by_job.values()), by_job
            assert len(set().union(*by_job.values())) == 4, by_job
            for group in groups:
                done = wait_for(lambda g=group: (c := upstream_condition(scratch, g))
                                and c["status"] == "True" and c, f"{group} True")
                assert done["reason"] == "Scheduled"
        finally:  # the PodGroups' finalizer holds the namespace until the pods are gone
            for plural in ("podgroups", "workloads"):
                with contextlib.suppress(client.ApiException):
                    scratch.custom.delete_collection_namespaced_custom_object(
                        *UPSTREAM, scratch.namespace, plural)


def kueue_objects(scratch: Scratch, docs: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """The page's ResourceFlavor, ClusterQueue and LocalQueue for this test: cluster-scoped
    names tagged, the ClusterQueue for this test's namespace only."""
    out = []
    renamed = {d["metadata"]["name"]: f"tm-{scratch.tag}-{d['metadata']['name']}"
               for d in docs if d["kind"] in ("ResourceFlavor", "ClusterQueue")}
    for doc in docs:
        if doc["kind"] not in KUEUE_PLURALS:
            continue
        obj = copy.deepcopy(doc)
        if obj["kind"] == "LocalQueue":
            obj["metadata"]["namespace"] = scratch.namespace
            obj["spec"]["clusterQueue"] = renamed[obj["spec"]["clusterQueue"]]
        else:
            obj["metadata"]["name"] = renamed[obj["metadata"]["name"]]
        if obj["kind"] == "ClusterQueue":
            obj["spec"]["namespaceSelector"] = {"matchLabels": {
                "kubernetes.io/metadata.name": scratch.namespace}}
            for group in obj["spec"]["resourceGroups"]:
                for flavor in group["flavors"]:
                    flavor["name"] = renamed[flavor["name"]]
        out.append(obj)
    return out


@contextlib.contextmanager
def created(custom: client.CustomObjectsApi, objs: list[dict[str, Any]]) -> Iterator[None]:
    """Kueue objects created; after, the cluster-scoped ones deleted (the namespaced ones
    go with the test's namespace)."""
    for obj in objs:
        plural, ns = KUEUE_PLURALS[obj["kind"]], obj["metadata"].get("namespace")
        if ns:
            custom.create_namespaced_custom_object(*KUEUE, ns, plural, obj)
        else:
            custom.create_cluster_custom_object(*KUEUE, plural, obj)
    try:
        yield
    finally:
        for obj in reversed(objs):
            if "namespace" not in obj["metadata"]:
                with contextlib.suppress(client.ApiException):
                    custom.delete_cluster_custom_object(*KUEUE, KUEUE_PLURALS[obj["kind"]],
                                                        obj["metadata"]["name"])


def suspended(scratch: Scratch, name: str) -> bool:
    obj = scratch.custom.get_namespaced_custom_object(*JOBSETS[:2], scratch.namespace,
                                                      JOBSETS[2], name)
    return bool(obj["spec"].get("suspend"))


def test_kueue_admits_the_pages_jobset_and_trainmaster_places_it_as_one_gang(
        local_cluster: LocalCluster, kueue_controller: Controller, tmp_path: Path) -> None:
    docs = page_block({"ResourceFlavor", "ClusterQueue", "LocalQueue", "JobSet"})
    (jobset,) = [d for d in docs if d["kind"] == "JobSet"]
    assert jobset["spec"]["suspend"] is True
    assert jobset["metadata"]["labels"]["kueue.x-k8s.io/queue-name"] == "team"
    with scratch_box(local_cluster.kubeconfig) as scratch, processes() as procs:
        add_ready_nodes(scratch, [(f"{leaf}{n}", f"leaf-{leaf}")
                                  for leaf in "ab" for n in range(4)])
        # No config: trainmaster's own queues are off, quota is Kueue's only.
        procs.append(SchedulerProcess(local_cluster.kubeconfig, scratch, tmp_path, "a"))
        with created(scratch.custom, kueue_objects(scratch, docs)):
            create_jobset(scratch, for_test(jobset, scratch, "first"))
            wait_for(lambda: not suspended(scratch, "first"),
                     "Kueue to admit (unsuspend) the first JobSet", 120)
            create_jobset(scratch, for_test(jobset, scratch, "second"))

            wait_for(lambda: bound(scratch, "first") == 4, "the first JobSet bound", 180)
            by_job = jobs_by_leaf(scratch, "first")
            assert sorted(by_job) == ["0", "1"]
            assert all(len(leaves) == 1 for leaves in by_job.values()), by_job
            assert by_job["0"] != by_job["1"], by_job

            # Over the ClusterQueue's 16 GPUs: Kueue keeps it suspended, so it has no pods
            # for trainmaster-scheduler to see at all.
            time.sleep(3)
            assert suspended(scratch, "second")
            assert jobset_pods(scratch, "second") == []

            scratch.custom.delete_namespaced_custom_object(
                *JOBSETS[:2], scratch.namespace, JOBSETS[2], "first",
                propagation_policy="Foreground")
            wait_for(lambda: not suspended(scratch, "second"),
                     "Kueue to admit the second JobSet once the first's quota is back", 180)
            wait_for(lambda: bound(scratch, "second") == 4, "the second JobSet bound", 180)
            # Its Workload gone with it, so the ClusterQueue's finalizer lets it go after.
            scratch.custom.delete_namespaced_custom_object(
                *JOBSETS[:2], scratch.namespace, JOBSETS[2], "second",
                propagation_policy="Foreground")
