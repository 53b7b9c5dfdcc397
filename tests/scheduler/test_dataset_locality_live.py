"""trainmaster-scheduler on the real control plane puts a gang that names a dataset on
the nodes whose cache holds it (state `ready`; warming and failed are cold), inside its
required leaf."""

from __future__ import annotations

from pathlib import Path

import pytest

from tests.conftest import LocalCluster
from tests.scheduler.live import (
    SchedulerProcess,
    Scratch,
    processes,
    wait_for,
)

pytestmark = pytest.mark.integration


def test_a_gang_goes_to_the_nodes_holding_its_dataset(
    local_cluster: LocalCluster, scratch: Scratch, tmp_path: Path
) -> None:
    dataset = f"ds-{scratch.tag}"
    names = [scratch.add_node(n) for n in ("a", "b", "c", "d")]
    other_leaf = scratch.add_node("e", leaf="leaf-b")
    key = f"dataset.trainmaster.io/{dataset}"
    warm = {"metadata": {"labels": {key: "ready"}}}
    for node in (names[2], names[3], other_leaf):
        scratch.core.patch_node(node, warm)
    # The other states are cold: a warm-up placed, one that failed.
    scratch.core.patch_node(names[0], {"metadata": {"labels": {key: "warming"}}})
    scratch.core.patch_node(names[1], {"metadata": {"labels": {key: "failed"}}})
    wait_for(scratch.nodes_ready, "scratch nodes Ready")
    scratch.create_group("readers", 2)
    pods = [scratch.pod(f"readers-{i}", gpus=8, group="readers") for i in range(2)]
    for pod in pods:
        pod["metadata"]["annotations"] = {"trainmaster.io/datasets": dataset}
    scratch.create_pods(pods)
    with processes() as procs:
        procs.append(SchedulerProcess(local_cluster.kubeconfig, scratch, tmp_path, "one"))
        bound = wait_for(lambda: (b := scratch.bound()) and len(b) == 2 and b, "gang bound")
    # Best fit alone would take a and b (ties go by name); the warm pair wins, in one leaf.
    assert sorted(bound.values()) == [names[2], names[3]]
