"""Upstream composite (multi-level) groups on the real local control plane: `cluster up`
turns on the CompositePodGroup gate (with GenericWorkload and
TopologyAwareWorkloadScheduling) and serves scheduling.k8s.io v1beta1 and v1alpha3, so a
Workload keeps its compositePodGroupTemplates and a PodGroup its
parentCompositePodGroupName. trainmaster-scheduler (a subprocess) places the children of
one composite level by level: each child PodGroup under one leaf, all of them under one
spine, and reports on every child's PodGroupInitiallyScheduled condition.

The v1alpha3 CompositePodGroup object: docs/interop.md's example (a CompositePodGroup,
its two PodGroups, two Indexed Jobs naming them), submitted as printed without a
Workload, is placed from the object's own policy and constraint, nothing of it bound
while no spine holds both PodGroups, and the object reports
CompositePodGroupInitiallyScheduled.

Each test brings its own kwok nodes (leaf and spine labels), namespace and schedulerName,
and removes everything at the end."""

from __future__ import annotations

import contextlib
import json
from pathlib import Path
from typing import Any

import pytest
from kubernetes import client

from tests.conftest import LocalCluster
from tests.helpers import ROOT
from tests.scheduler.live import (
    SchedulerProcess,
    Scratch,
    fit_page_object,
    interop_page_objects,
    processes,
    wait_for,
)
from tests.scheduler.test_upstream_groups_live import UPSTREAM, _cleanup_groups, _status

pytestmark = pytest.mark.integration

PAGE = ROOT / "docs" / "interop.md"
ALPHA = ("scheduling.k8s.io", "v1alpha3")
LEAF_KEY = "topology.trainmaster.io/leaf"
SPINE_KEY = "topology.trainmaster.io/spine"


def composite_workload(scratch: Scratch, name: str, replicas: int, pods: int) -> None:
    """A Workload whose one composite template (the whole, under one spine, every replica
    needed) holds one child template (a replica of `pods` pods under one leaf)."""
    scratch.custom.create_namespaced_custom_object(*UPSTREAM, scratch.namespace, "workloads", {
        "apiVersion": "scheduling.k8s.io/v1beta1", "kind": "Workload",
        "metadata": {"name": name},
        "spec": {"compositePodGroupTemplates": [{
            "name": "all",
            "schedulingPolicy": {"gang": {"minGroupCount": replicas}},
            "schedulingConstraints": {"topology": [{"key": SPINE_KEY}]},
            "podGroupTemplates": [{
                "name": "replica",
                "schedulingPolicy": {"gang": {"minCount": pods}},
                "schedulingConstraints": {"topology": [{"key": LEAF_KEY}]},
            }],
        }]},
    })


def replica_group(scratch: Scratch, workload: str, index: int, pods: int) -> str:
    """The PodGroup of replica `index`, made from the child template, as a workload
    controller would make it."""
    name = f"{workload}-all-{index}"
    scratch.custom.create_namespaced_custom_object(*UPSTREAM, scratch.namespace, "podgroups", {
        "apiVersion": "scheduling.k8s.io/v1beta1", "kind": "PodGroup",
        "metadata": {"name": name},
        "spec": {"parentCompositePodGroupName": f"{workload}-all",
                 "workloadRef": {"workloadName": workload, "templateName": "replica"},
                 "schedulingPolicy": {"gang": {"minCount": pods}},
                 "schedulingConstraints": {"topology": [{"key": LEAF_KEY}]}},
    })
    return name


def replica_pods(scratch: Scratch, group: str, pods: int) -> list[dict[str, Any]]:
    out = []
    for i in range(pods):
        body = scratch.pod(f"{group}-{i}", gpus=8)
        body["spec"]["schedulingGroup"] = {"podGroupName": group}
        out.append(body)
    return out


def get_raw(scratch: Scratch, path: str) -> Any:
    """``kubectl get --raw path``, parsed."""
    api = scratch.api_client
    method, url, headers, _, _ = api.param_serialize("GET", path,
                                                     auth_settings=["BearerToken"])
    return json.loads(api.call_api(method, url, headers).read())


def test_the_served_api_keeps_the_composite_shape(
    local_cluster: LocalCluster, scratch: Scratch
) -> None:
    """The served OpenAPI has the composite fields (the gate is on); an object keeps them."""
    schemas = get_raw(scratch, "/openapi/v3/apis/scheduling.k8s.io/v1beta1")[
        "components"]["schemas"]
    spec = schemas["io.k8s.api.scheduling.v1beta1.WorkloadSpec"]["properties"]
    group = schemas["io.k8s.api.scheduling.v1beta1.PodGroupSpec"]["properties"]
    assert "compositePodGroupTemplates" in spec
    assert "parentCompositePodGroupName" in group
    # v1alpha3 is served too: kube-scheduler watches its CompositePodGroups (gate on)
    alpha = get_raw(scratch, "/apis/scheduling.k8s.io/v1alpha3")
    assert "compositepodgroups" in {r["name"] for r in alpha["resources"]}
    with _cleanup_groups(scratch):
        composite_workload(scratch, "shape", 2, 2)
        replica_group(scratch, "shape", 0, 2)
        wl = scratch.custom.get_namespaced_custom_object(*UPSTREAM, scratch.namespace,
                                                         "workloads", "shape")
        pg = scratch.custom.get_namespaced_custom_object(*UPSTREAM, scratch.namespace,
                                                         "podgroups", "shape-all-0")
        (template,) = wl["spec"]["compositePodGroupTemplates"]
        assert template["schedulingConstraints"] == {"topology": [{"key": SPINE_KEY}]}
        assert template["podGroupTemplates"][0]["name"] == "replica"
        assert pg["spec"]["parentCompositePodGroupName"] == "shape-all"


def test_a_composite_is_placed_each_replica_under_one_leaf_all_under_one_spine(
    local_cluster: LocalCluster, scratch: Scratch, tmp_path: Path
) -> None:
    # spine a: leaf a1 of 2 nodes, leaf a2 of 1 node: one replica (2 pods x 8 GPUs) fits
    # there, the second does not. Spine b (added later): two leaves of 2 nodes.
    for leaf, count in (("a1", 2), ("a2", 1)):
        for i in range(count):
            scratch.add_node(f"{leaf}-{i}", leaf=f"leaf-{leaf}", spine="spine-a")
    wait_for(scratch.nodes_ready, "scratch nodes Ready")
    with _cleanup_groups(scratch), processes() as procs:
        composite_workload(scratch, "train", 2, 2)
        first = replica_group(scratch, "train", 0, 2)
        scratch.create_pods(replica_pods(scratch, first, 2))
        procs.append(SchedulerProcess(local_cluster.kubeconfig, scratch, tmp_path, "one"))
        # one replica of the two exists: it fits, but the composite waits for both
        waiting = wait_for(
            lambda: (c := _status(scratch, first, "False")) and "minGroupCount" in c["message"]
            and c, "the first replica told it waits for minGroupCount")
        assert "1 of minGroupCount 2 PodGroups exist" in waiting["message"], waiting
        assert scratch.bound() == {}

        second = replica_group(scratch, "train", 1, 2)
        scratch.create_pods(replica_pods(scratch, second, 2))
        # both exist; no spine holds both replicas, each under one leaf: nothing binds
        short = wait_for(
            lambda: (c := _status(scratch, second, "False")) and "spine" in c["message"]
            and c, "the composite told no spine holds it")
        assert short["reason"] == "Unschedulable"
        assert "fits in no single spine" in short["message"], short
        assert scratch.bound() == {}

        for leaf in ("b1", "b2"):
            for i in range(2):
                scratch.add_node(f"{leaf}-{i}", leaf=f"leaf-{leaf}", spine="spine-b")
        bound = wait_for(lambda: (b := scratch.bound()) and len(b) == 4 and b,
                         "the composite bound", 120)
        spines = {str(scratch.core.read_node(n).metadata.labels[SPINE_KEY])
                  for n in bound.values()}
        assert spines == {f"tm-{scratch.tag}-spine-b"}
        for group in (first, second):
            leaves = {scratch.leaf_of(bound[f"{group}-{i}"]) for i in range(2)}
            assert len(leaves) == 1, (group, leaves)
            done = wait_for(lambda g=group: _status(scratch, g, "True"),
                            f"{group} PodGroupInitiallyScheduled=True")
            assert done["reason"] == "Scheduled"


def composite_condition(scratch: Scratch, name: str, status: str) -> dict[str, Any] | None:
    obj = scratch.custom.get_namespaced_custom_object(*ALPHA, scratch.namespace,
                                                      "compositepodgroups", name)
    return next((c for c in (obj.get("status") or {}).get("conditions") or []
                 if c["type"] == "CompositePodGroupInitiallyScheduled"
                 and c["status"] == status), None)


def test_the_pages_composite_pod_group_places_each_podgroup_under_a_leaf_all_under_a_spine(
    local_cluster: LocalCluster, scratch: Scratch, tmp_path: Path
) -> None:
    objects = [fit_page_object(scratch, o) for o in interop_page_objects("CompositePodGroup")]
    kinds = sorted(o["kind"] for o in objects)
    assert kinds == ["CompositePodGroup", "Job", "Job", "PodGroup", "PodGroup"], kinds
    (composite,) = [o["metadata"]["name"] for o in objects if o["kind"] == "CompositePodGroup"]
    groups = [o["metadata"]["name"] for o in objects if o["kind"] == "PodGroup"]
    assert all(o["spec"]["parentCompositePodGroupName"] == composite
               for o in objects if o["kind"] == "PodGroup")
    group_of_job = {o["metadata"]["name"]:
                    o["spec"]["template"]["spec"]["schedulingGroup"]["podGroupName"]
                    for o in objects if o["kind"] == "Job"}
    assert sorted(group_of_job.values()) == sorted(groups)
    # spine a: a leaf of 4 nodes and one of 3; spine b: a leaf of 4. Each PodGroup (4 pods
    # x 8 GPUs) fits a leaf of 4, but no spine holds both, each under one leaf.
    for leaf, spine, count in (("a1", "spine-a", 4), ("a2", "spine-a", 3),
                               ("b1", "spine-b", 4)):
        for i in range(count):
            scratch.add_node(f"{leaf}-{i}", leaf=f"leaf-{leaf}", spine=spine)
    wait_for(scratch.nodes_ready, "scratch nodes Ready")
    batch = client.BatchV1Api(scratch.api_client)
    try:
        for obj in objects:
            if obj["kind"] == "CompositePodGroup":
                scratch.custom.create_namespaced_custom_object(
                    *ALPHA, scratch.namespace, "compositepodgroups", obj)
            elif obj["kind"] == "PodGroup":
                scratch.custom.create_namespaced_custom_object(
                    *UPSTREAM, scratch.namespace, "podgroups", obj)
        for obj in objects:
            if obj["kind"] == "Job":
                batch.create_namespaced_job(scratch.namespace, obj)
        with processes() as procs:
            procs.append(SchedulerProcess(local_cluster.kubeconfig, scratch, tmp_path, "one"))
            short = wait_for(lambda: composite_condition(scratch, composite, "False"),
                             "the CompositePodGroup told no spine holds it", 120)
            assert short["reason"] == "Unschedulable", short
            assert "fits in no single spine" in short["message"], short
            for group in groups:
                cond = wait_for(lambda g=group: _status(scratch, g, "False"),
                                f"{group} PodGroupInitiallyScheduled=False")
                assert "fits in no single spine" in cond["message"], cond
            assert len(scratch.pods()) == 8
            assert scratch.bound() == {}  # not partially: 7 of the 8 pods had a node

            scratch.add_node("a2-3", leaf="leaf-a2", spine="spine-a")
            bound = wait_for(lambda: (b := scratch.bound()) and len(b) == 8 and b,
                             "the composite's 8 pods bound", 120)
            spines = {str(scratch.core.read_node(n).metadata.labels[SPINE_KEY])
                      for n in bound.values()}
            assert spines == {f"tm-{scratch.tag}-spine-a"}
            leaves: dict[str, set[str]] = {}  # PodGroup -> leaves of its pods
            for pod in scratch.pods():  # a Job's pods name its PodGroup
                group = group_of_job[pod.metadata.labels["job-name"]]
                leaves.setdefault(group, set()).add(scratch.leaf_of(pod.spec.node_name))
            assert sorted(leaves) == sorted(groups), leaves
            assert all(len(v) == 1 for v in leaves.values()), leaves
            assert leaves[groups[0]] != leaves[groups[1]]  # no one leaf holds 8 pods
            done = wait_for(lambda: composite_condition(scratch, composite, "True"),
                            "CompositePodGroupInitiallyScheduled=True")
            assert done["reason"] == "Scheduled", done
            for group in groups:
                assert wait_for(lambda g=group: _status(scratch, g, "True"),
                                f"{group} PodGroupInitiallyScheduled=True")["reason"] == (
                    "Scheduled")
    finally:
        batch.delete_collection_namespaced_job(scratch.namespace,
                                               propagation_policy="Background")
        for version, plural in ((ALPHA, "compositepodgroups"), (UPSTREAM, "podgroups")):
            with contextlib.suppress(client.ApiException):
                scratch.custom.delete_collection_namespaced_custom_object(
                    *version, scratch.namespace, plural)
