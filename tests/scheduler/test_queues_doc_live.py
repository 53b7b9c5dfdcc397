"""docs/queues.md's team job, submitted on the real control plane: the PodGroup and the
Indexed Job of the page, as they are printed there, created by a team's ServiceAccount
bound to the rendered `<cluster>-queue-user` Role in its namespace, are bound together by
the scheduler (run as its own ServiceAccount with the rendered rights) and charged to the
queue the team's LocalQueue points at.

Only what must differ on a shared test cluster is substituted: the namespace (`team-a`
-> this test's), the scheduler's name, and the test nodes' label and taint (added to the
pod template, beside the page's own GPU toleration)."""

from __future__ import annotations

import re
from pathlib import Path
from typing import Any

import pytest
import yaml

from tests.conftest import LocalCluster
from tests.helpers import ROOT
from tests.scheduler.live import (
    PODGROUPS,
    TEST_LABEL,
    Scratch,
    add_ready_nodes,
    applied,
    ensure_crd,
    namespaces,
    processes,
    scratch_spec,
    start_as_its_account,
    token_kubeconfig,
    wait_for,
)
from tests.scheduler.test_local_queues_live import APPLIED, LOCALQUEUES, Team, _bind_team
from trainmaster.api import POD_GROUP_LABEL, QUEUE_LABEL
from trainmaster.objects import build_scheduler
from trainmaster.objects._crds import localqueue_crd
from trainmaster.spec import ClusterSpec

pytestmark = pytest.mark.integration

PAGE = ROOT / "docs" / "queues.md"


def _page_objects() -> list[dict[str, Any]]:
    """The page's Kubernetes objects: its YAML block with a PodGroup and a Job."""
    for block in re.findall(r"^```yaml\n(.*?)^```", PAGE.read_text(), re.S | re.M):
        docs = [d for d in yaml.safe_load_all(block) if d]
        if {d.get("kind") for d in docs} == {"PodGroup", "Job"}:
            return docs
    raise AssertionError(f"{PAGE}: no YAML block with a PodGroup and a Job")


def _spec(scratch: Scratch, team: str) -> ClusterSpec:
    """The page's platform side: `team` served, its LocalQueue lq-a charging `alpha`."""
    return scratch_spec(
        scratch, "qdoc", namespaces=[team],
        queues=[{"name": "default"}, {"name": "alpha", "nominalQuota": 0, "cohort": "lab"}],
        cohorts=[{"name": "lab", "resources": [{"name": "nvidia.com/gpu", "nominalQuota": 32}]}],
        localQueues=[{"name": "lq-a", "namespace": team, "clusterQueue": "alpha"}])


def _for_test(obj: dict[str, Any], scratch: Scratch, team: str) -> dict[str, Any]:
    assert obj["metadata"]["namespace"] == "team-a"
    obj["metadata"]["namespace"] = team
    if obj["kind"] == "Job":
        pod = obj["spec"]["template"]["spec"]
        assert pod["schedulerName"] == "trainmaster-scheduler"
        pod["schedulerName"] = scratch.scheduler
        pod["nodeSelector"] = {TEST_LABEL: scratch.tag}
        pod["tolerations"] = [*pod["tolerations"], {"key": TEST_LABEL, "operator": "Exists"}]
        pod["terminationGracePeriodSeconds"] = 0
    return obj


def test_the_pages_team_job_is_bound_whole_and_charged_to_its_local_queues_queue(
    local_cluster: LocalCluster, scratch: Scratch, tmp_path: Path
) -> None:
    group, job = sorted(_page_objects(), key=lambda d: d["kind"] != "PodGroup")
    assert group["metadata"]["labels"][QUEUE_LABEL] == "lq-a"
    labels = job["spec"]["template"]["metadata"]["labels"]
    assert labels == {QUEUE_LABEL: "lq-a", POD_GROUP_LABEL: group["metadata"]["name"]}
    team, system = f"{scratch.namespace}-a", f"{scratch.namespace}-system"
    spec = _spec(scratch, team)
    with namespaces(scratch, team, system):
        ensure_crd(scratch.api_client, localqueue_crd(), LOCALQUEUES, "LocalQueue")
        add_ready_nodes(scratch, [(f"{leaf}-{i}", leaf) for leaf in ("leaf-a", "leaf-b")
                                  for i in range(2)])
        rendered = [o for o in build_scheduler(spec) if o["kind"] in APPLIED]
        with applied(scratch, rendered), processes() as procs:
            _bind_team(scratch, spec, team, "alice")
            alice = Team(token_kubeconfig(local_cluster.kubeconfig, scratch, "alice", team,
                                          tmp_path / "alice.yaml"), team, scratch)
            start_as_its_account(procs, local_cluster.kubeconfig, scratch, spec, system,
                                 tmp_path)
            # As the team would `kubectl apply -f` the page's objects, with its own token.
            group, job = (_for_test(o, scratch, team) for o in (group, job))
            alice.custom.create_namespaced_custom_object(*PODGROUPS[:2], team, PODGROUPS[2],
                                                         group)
            alice.batch.create_namespaced_job(team, job)
            name = group["metadata"]["name"]

            def bound() -> list[Any] | None:
                pods = alice.pods(name)
                return pods if len(pods) == 2 and all(p.spec.node_name for p in pods) \
                    else None

            pods = wait_for(bound, "both pods of the page's gang bound", 240)
            leaves = {scratch.leaf_of(p.spec.node_name) for p in pods}
            assert len(leaves) == 1, leaves  # one switch, by the spec's topology policy
            gauge = 'trainmaster_scheduler_queue_gpus_in_use{queue="alpha"}'
            wait_for(lambda: procs[0].metrics().get(gauge) == 16,
                     "alpha (lq-a's queue) charged the gang's 16 GPUs", 120)
            # The scheduler named the cluster it served before anything else.
            lines = procs[0].log.read_text().splitlines()
            assert any(line.startswith("trainmaster-scheduler: context ")
                       for line in lines[:5]), lines[:5]
