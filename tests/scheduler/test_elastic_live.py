"""An elastic gang on the real local control plane (kwok nodes): trainmaster-scheduler
admits it at partial size, leaves the rest pending, and binds them when a node joins.
Waits are long (the shared machine can take minutes to make a kwok node Ready); they
bound correctness only."""

from __future__ import annotations

from pathlib import Path

import pytest

from tests.conftest import LocalCluster
from tests.scheduler.live import PODGROUPS, SchedulerProcess, Scratch, processes, wait_for
from trainmaster.api import MAX_MEMBERS_ANNOTATION

pytestmark = pytest.mark.integration


def test_elastic_gang_is_admitted_at_partial_size_and_grows(
    local_cluster: LocalCluster, scratch: Scratch, tmp_path: Path
) -> None:
    scratch.add_node("a")
    scratch.add_node("b")
    wait_for(scratch.nodes_ready, "scratch nodes Ready", 300)
    # minMember 2, max 3, no topology annotation: the policy applies to the size placed.
    scratch.custom.create_namespaced_custom_object(*PODGROUPS[:2], scratch.namespace,
                                                   PODGROUPS[2], {
        "apiVersion": "scheduling.x-k8s.io/v1alpha1", "kind": "PodGroup",
        "metadata": {"name": "el", "annotations": {MAX_MEMBERS_ANNOTATION: "3"}},
        "spec": {"minMember": 2},
    })
    names = [f"el-{i}" for i in range(3)]
    scratch.create_pods([scratch.pod(n, gpus=8, group="el") for n in names])
    with processes() as procs:
        procs.append(SchedulerProcess(local_cluster.kubeconfig, scratch, tmp_path, "one"))
        first = wait_for(lambda: (b := scratch.bound()) and len(b) == 2 and b,
                         "the gang admitted at 2 of 3", 300)
        assert len(set(first.values())) == 2
        (waiting,) = set(names) - set(first)
        assert scratch.bound() == first  # the third has nowhere to go: it stays pending

        scratch.add_node("c")  # capacity frees: the gang grows to 3
        wait_for(scratch.nodes_ready, "node c Ready", 300)
        grown = wait_for(lambda: (b := scratch.bound()) and len(b) == 3 and b,
                         "the gang grown to 3", 300)
        assert {k: v for k, v in grown.items() if k != waiting} == first
        assert len(set(grown.values())) == 3
