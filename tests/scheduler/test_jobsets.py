"""JobSets as gangs (unit): a JobSet's pods form one gang whose Jobs are its parts, each
placed whole in its own domain of the exclusive-topology level, all or nothing. The live
path (the real JobSet controller, the real scheduler) is tests/scheduler/test_interop_live.py."""

from __future__ import annotations

import dataclasses
from typing import Any

from trainmaster.scheduler import Gang, TopologyConstraint, TopologyMode, place_gang
from trainmaster.scheduler.framework.results import Placement, Unschedulable
from trainmaster.scheduler.framework.status import Code
from trainmaster.scheduler.runtime.config import SchedulerConfig
from trainmaster.scheduler.runtime.convert import PodGroupInfo, pod_info
from trainmaster.scheduler.runtime.gangs import Waiting, assemble
from trainmaster.scheduler.runtime.jobsets import EXCLUSIVE_TOPOLOGY, jobset_group_info

from .builders import LEVELS, make_cluster, make_pod

LEAF_LABEL = "topology.trainmaster.io/leaf"


def jobset_gang(jobs: int, pods: int, gpus: int, level: str = "leaf") -> Gang:
    """`jobs` Jobs of `pods` pods each, as the runtime assembles a JobSet's gang."""
    members = tuple(
        dataclasses.replace(make_pod(f"js-w-{j}-{p}", gpus=gpus, gang="jobset:js"),
                            part=f"w/{j}")
        for j in range(jobs) for p in range(pods))
    return Gang(name="jobset:js", members=members, part_level=level,
                topology=TopologyConstraint("cluster", TopologyMode.PREFERRED))


def leaves_by_part(snap: Any, placement: Placement) -> dict[str, set[str]]:
    out: dict[str, set[str]] = {}
    for b in placement.bindings:
        out.setdefault(b.pod.part, set()).add(snap.domain_of(b.node, "leaf"))
    return out


def test_each_job_whole_in_its_own_leaf() -> None:
    # 4 leaves of 4 nodes x 8 GPUs; 4 Jobs x 4 pods x 8 GPUs: one Job fills one leaf.
    snap = make_cluster(2, 2, 4)
    result = place_gang(snap, jobset_gang(4, 4, 8))
    assert isinstance(result, Placement), result
    by_part = leaves_by_part(snap, result)
    assert sorted(by_part) == ["w/0", "w/1", "w/2", "w/3"]
    assert all(len(leaves) == 1 for leaves in by_part.values())
    assert len(set().union(*by_part.values())) == 4
    assert list(snap.pods()) == []  # the snapshot is unchanged: the caller assumes


def test_no_two_jobs_share_a_leaf_even_when_one_could_hold_both() -> None:
    # Each Job needs one node (2 pods x 4 GPUs): one leaf could hold all of them.
    snap = make_cluster(1, 2, 4)
    result = place_gang(snap, jobset_gang(2, 2, 4))
    assert isinstance(result, Placement), result
    by_part = leaves_by_part(snap, result)
    assert by_part["w/0"] != by_part["w/1"]
    # Three Jobs, two leaves: refused whole, naming the Job that found no leaf left.
    refused = place_gang(snap, jobset_gang(3, 2, 4))
    assert isinstance(refused, Unschedulable)
    assert "part w/2 fits in no leaf left" in refused.reason
    assert list(snap.pods()) == []


def test_starts_only_when_all_of_it_fits() -> None:
    snap = make_cluster(2, 2, 4)
    snap.assume(make_pod("busy", gpus=1, cpu=0, memory=0), "s1-l1-n3")  # one leaf short
    result = place_gang(snap, jobset_gang(4, 4, 8))
    assert isinstance(result, Unschedulable)
    assert result.code is Code.UNSCHEDULABLE
    assert [p.name for p, _, _ in snap.pods()] == ["busy"]  # nothing of it assumed


def test_waits_for_every_pod_of_every_job() -> None:
    gang = dataclasses.replace(jobset_gang(4, 4, 8), min_member=20)
    result = place_gang(make_cluster(2, 2, 4), gang)
    assert isinstance(result, Unschedulable)
    assert result.code is Code.WAIT


def jobset(name: str = "train", replicas: int = 4, parallelism: int = 4,
           exclusive: str | None = LEAF_LABEL, queue: str | None = None) -> dict[str, Any]:
    annotations = {EXCLUSIVE_TOPOLOGY: exclusive} if exclusive else {}
    labels = {"kueue.x-k8s.io/queue-name": queue} if queue else {}
    return {
        "metadata": {"name": name, "namespace": "ns", "uid": "u1", "labels": labels,
                     "annotations": annotations,
                     "creationTimestamp": "2026-01-01T00:00:00Z"},
        "spec": {"replicatedJobs": [{"name": "w", "replicas": replicas, "template": {
            "spec": {"parallelism": parallelism, "completions": parallelism}}}]},
    }


def test_group_from_the_jobset_object() -> None:
    info = jobset_group_info(jobset(queue="research"), LEVELS)
    assert (info.key, info.min_member, info.part_level, info.queue) == (
        "ns/jobset:train", 16, "leaf", "research")
    assert info.problem is None
    hostname = jobset_group_info(jobset(exclusive="kubernetes.io/hostname"), LEVELS)
    assert hostname.part_level == "node"
    plain = jobset_group_info(jobset(exclusive=None, parallelism=2), LEVELS)
    assert (plain.min_member, plain.part_level) == (8, "")


def test_unknown_exclusive_key_is_told_with_the_keys_it_could_name() -> None:
    info = jobset_group_info(jobset(exclusive="cloud.google.com/gke-nodepool"), LEVELS)
    assert info.problem is not None
    assert "cloud.google.com/gke-nodepool" in info.problem
    assert "topology.trainmaster.io/leaf" in info.problem
    waiting = assemble(info.key, info, [make_pod("p", gang="jobset:train")], [],
                       SchedulerConfig(levels=LEVELS))
    assert isinstance(waiting, Waiting)
    assert waiting.reason == info.problem


def test_assembled_gang_is_placed_part_by_part() -> None:
    info = jobset_group_info(jobset(replicas=2, parallelism=1), LEVELS)
    pods = [dataclasses.replace(make_pod(f"p{j}", gang="jobset:train", namespace="ns"),
                                part=f"w/{j}") for j in range(2)]
    gang = assemble(info.key, info, pods, [], SchedulerConfig(levels=LEVELS))
    assert isinstance(gang, Gang)
    assert (gang.part_level, gang.min_member, gang.key) == ("leaf", 2, "ns/jobset:train")
    missing = assemble("ns/jobset:other", None, pods, [], SchedulerConfig(levels=LEVELS))
    assert isinstance(missing, Waiting)
    assert missing.reason.startswith("waiting for JobSet ns/other")


def pod(labels: dict[str, str]) -> dict[str, Any]:
    return {"metadata": {"name": "p", "namespace": "ns", "uid": "u", "labels": labels},
            "spec": {"schedulerName": "trainmaster-scheduler", "containers": []}}


def test_pod_labels_name_the_gang_and_the_part() -> None:
    js = {"jobset.sigs.k8s.io/jobset-name": "train",
          "jobset.sigs.k8s.io/replicatedjob-name": "w", "jobset.sigs.k8s.io/job-index": "3"}
    request = pod_info(pod(js)).request
    assert (request.gang_key, request.part) == ("ns/jobset:train", "w/3")
    # The scheduler-plugins PodGroup label wins: the pod is that group's, in no part.
    both = pod_info(pod({**js, "scheduling.x-k8s.io/pod-group": "pg"})).request
    assert (both.gang_key, both.part) == ("ns/pg", "")
    assert pod_info(pod({})).request.gang_key is None


def test_podgroup_info_has_no_parts() -> None:
    assert PodGroupInfo("ns", "g", "", 2, None, 0.0).part_level == ""
