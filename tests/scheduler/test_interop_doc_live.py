"""docs/interop.md's upstream gang API example, submitted on the real control plane: the
Workload, PodGroup and Indexed Job of the page, as printed there. trainmaster-scheduler
binds the Job's 4 pods under one leaf and reports PodGroupInitiallyScheduled=True.

Only what must differ on a shared test cluster is substituted: the namespace
(`trainmaster` -> this test's), the scheduler's name, and the test nodes' label and taint
(added to the pod template, beside the page's own GPU toleration)."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest
import yaml
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

pytestmark = pytest.mark.integration

PAGE = ROOT / "docs" / "interop.md"
UPSTREAM = ("scheduling.k8s.io", "v1beta1")


def test_the_pages_workload_podgroup_and_job_run_as_one_gang_under_one_leaf(
    local_cluster: LocalCluster, scratch: Scratch, tmp_path: Path
) -> None:
    objects = {o["kind"]: fit_page_object(scratch, o) for o in interop_page_objects("Workload")}
    assert set(objects) == {"Workload", "PodGroup", "Job"}
    group = objects["PodGroup"]["metadata"]["name"]
    # leaf-a has room for 3 of the 4 pods, leaf-b for all of them.
    for i in range(3):
        scratch.add_node(f"a{i}", leaf="leaf-a")
    for i in range(4):
        scratch.add_node(f"b{i}", leaf="leaf-b")
    wait_for(scratch.nodes_ready, "scratch nodes Ready")
    config = tmp_path / "config.yaml"
    config.write_text(yaml.safe_dump({"queues": [{"name": "research", "nominalQuota": 64}]}))
    batch = client.BatchV1Api(scratch.api_client)
    try:
        for kind in ("Workload", "PodGroup"):
            scratch.custom.create_namespaced_custom_object(
                *UPSTREAM, scratch.namespace, f"{kind.lower()}s", objects[kind])
        batch.create_namespaced_job(scratch.namespace, objects["Job"])
        with processes() as procs:
            procs.append(SchedulerProcess(local_cluster.kubeconfig, scratch, tmp_path, "one",
                                          "--config", str(config)))
            bound = wait_for(lambda: (b := scratch.bound()) and len(b) == 4 and b,
                             "the Job's 4 pods bound")
            assert {scratch.leaf_of(n) for n in bound.values()} == {
                f"tm-{scratch.tag}-leaf-b"}

            def scheduled() -> dict[str, Any] | None:
                obj = scratch.custom.get_namespaced_custom_object(
                    *UPSTREAM, scratch.namespace, "podgroups", group)
                return next((c for c in (obj.get("status") or {}).get("conditions") or []
                             if c["type"] == "PodGroupInitiallyScheduled"
                             and c["status"] == "True"), None)

            assert wait_for(scheduled, "PodGroupInitiallyScheduled=True")["reason"] == (
                "Scheduled")
    finally:
        batch.delete_collection_namespaced_job(scratch.namespace,
                                               propagation_policy="Background")
        for plural in ("podgroups", "workloads"):
            scratch.custom.delete_collection_namespaced_custom_object(
                *UPSTREAM, scratch.namespace, plural)
