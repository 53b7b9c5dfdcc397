"""The benchmark's pure parts: the workload, the cluster spec, options, the JSON shape."""

from __future__ import annotations

import tempfile
from dataclasses import replace
from pathlib import Path

import pytest
import yaml

from trainmaster.bench import (
    CONTENDERS,
    BenchError,
    BenchOptions,
    BenchResult,
    ContenderResult,
    gang_sizes,
    leaves_needed,
    workload,
)
from trainmaster.bench._cluster import bench_spec
from trainmaster.bench._contenders import KubeScheduler, RunContext, Trainmaster, make
from trainmaster.bench._workload import pod, pod_group
from trainmaster.scheduler import SchedulerConfig
from trainmaster.spec import load_spec


def test_gangs_are_seeded_sized_1_to_32_and_add_up() -> None:
    sizes = gang_sizes(1000, seed=1)
    assert sum(sizes) == 1000 and all(1 <= s <= 32 for s in sizes)
    assert sizes == gang_sizes(1000, seed=1) != gang_sizes(1000, seed=2)
    gangs = workload(1000, seed=1)
    assert [g.size for g in gangs] == sizes
    assert {(g.domain, g.mode) for g in gangs if g.size == 1} <= {("node", "required")}
    assert {(g.domain, g.mode) for g in gangs if g.size > 1} == {("leaf", "preferred")}


def test_pods_and_pod_groups() -> None:
    gang = workload(40, seed=3)[0]
    group = pod_group(gang, "ns")
    assert group["spec"]["minMember"] == gang.size
    assert group["metadata"]["annotations"]["trainmaster.io/topology-domain"] == gang.domain
    body = pod(gang, 0, "ns", "default-scheduler", ["rdma/rail0"])
    assert body["spec"]["schedulerName"] == "default-scheduler"
    assert body["metadata"]["labels"]["scheduling.x-k8s.io/pod-group"] == gang.name
    assert body["spec"]["containers"][0]["resources"]["requests"]["nvidia.com/gpu"] == "4"


def test_leaves_needed() -> None:
    assert leaves_needed(1, 160) == 1 and leaves_needed(32, 160) == 1
    assert leaves_needed(41, 160) == 2


@pytest.mark.parametrize("nodes", [500, 45, 7])
def test_bench_spec_has_the_requested_nodes(nodes: int) -> None:
    with tempfile.TemporaryDirectory() as tmp:
        path = Path(tmp) / "cluster.yaml"
        path.write_text(yaml.safe_dump(bench_spec(nodes)))
        spec = load_spec(path)
    assert len(spec.nodes) == nodes
    assert {len(n.switches) for n in spec.nodes} == {2}
    if nodes == 500:
        assert spec.nodes[-1].name == "node-499"  # the same names as stacks/bench


def test_options_and_json_shape() -> None:
    assert BenchOptions().contenders() == CONTENDERS
    assert BenchOptions(only=("bind-ceiling",)).contenders() == ("bind-ceiling",)
    with pytest.raises(BenchError, match="unknown scheduler"):
        BenchOptions(only=("volcano",)).contenders()
    result = BenchResult(500, 1000, (ContenderResult("trainmaster", 2.0, 500.0, 1000, 0, 0,
                                                     0.9, 1.8, 2.5, 5, 95.0),),
                         (1.5, 2.0, 2.5))
    assert result.to_json() == {"nodes": 500, "pods": 1000, "load_average": [1.5, 2.0, 2.5],
                                "results": [{
        "scheduler": "trainmaster", "seconds": 2.0, "pods_per_second": 500.0, "bound": 1000,
        "overcommitted_nodes": 0, "gangs_split_beyond_needed": 0, "first_bind_seconds": 0.9,
        "seconds_min": 1.8, "seconds_max": 2.5, "rounds": 5, "percent_of_limit": 95.0,
        "rss_mb": None, "peak_rss_mb": None}]}


def test_a_contender_process_reports_its_own_memory(tmp_path: Path) -> None:
    import asyncio
    import sys

    from trainmaster.bench._contenders import _Process, process_memory

    # A child that holds ~64 MiB, then frees most of it: RSS falls, the peak stays.
    code = ("import sys, time; b = bytearray(64 << 20); b[::4096] = b'x' * len(b[::4096]); "
            "del b; print('ready', flush=True); time.sleep(60)")
    proc = _Process([sys.executable, "-c", code], tmp_path / "child.log")
    proc.spawn()
    try:
        assert proc.proc is not None
        deadline = 50
        while "ready" not in (tmp_path / "child.log").read_text() and deadline:
            asyncio.run(asyncio.sleep(0.2))
            deadline -= 1
        memory = proc.memory()
        assert memory is not None
        assert memory.peak_rss_mb >= 64 > memory.rss_mb > 1
    finally:
        asyncio.run(proc.stop())
    assert proc.memory() is None  # stopped: nothing to read
    assert process_memory(2**22 + 7) is None  # no such process


def test_contender_configs(tmp_path: Path) -> None:
    ctx = RunContext(tmp_path / "kubeconfig", "bench-x", tmp_path, 64)
    config = SchedulerConfig.from_mapping(Trainmaster().config(ctx))  # the runtime reads it
    assert config.bind_concurrency == 64 and config.leader_election.lease_namespace == "bench-x"
    default, tuned = KubeScheduler("default").config(ctx), KubeScheduler("tuned").config(ctx)
    assert "qps" not in default["clientConnection"] and "percentageOfNodesToScore" not in default
    assert tuned["clientConnection"]["qps"] == 5000 and tuned["clientConnection"]["burst"] == 5000
    assert default["leaderElection"] == tuned["leaderElection"] == {"leaderElect": False}
    assert "profiles" not in default and "profiles" not in tuned
    assert tuned["percentageOfNodesToScore"] == 1


def test_the_affinity_variant_scores_every_feasible_node(tmp_path: Path) -> None:
    # At 1% kube-scheduler scores ~100 nodes per pod and can hardly find a gang's peers.
    ctx = RunContext(tmp_path / "kubeconfig", "bench-x", tmp_path, 64)
    affinity = KubeScheduler("tuned-affinity").config(ctx)
    assert affinity["percentageOfNodesToScore"] == 100
    assert affinity["clientConnection"]["qps"] == 5000


def test_nodecisions_disables_every_filter_and_score_plugin(tmp_path: Path) -> None:
    ctx = RunContext(tmp_path / "kubeconfig", "bench-x", tmp_path, 64)
    limit = make("kube-scheduler-nodecisions")
    assert isinstance(limit, KubeScheduler) and not limit.pod_affinity
    doc = limit.config(ctx)
    assert doc["clientConnection"]["qps"] == 5000 and doc["clientConnection"]["burst"] == 5000
    (profile,) = doc["profiles"]
    assert profile["schedulerName"] == "default-scheduler"
    assert profile["plugins"] == {
        "multiPoint": {"disabled": [{"name": "*"}]},
        "queueSort": {"enabled": [{"name": "PrioritySort"}]},
        "bind": {"enabled": [{"name": "DefaultBinder"}]},
    }
    assert make("kube-scheduler-tuned-affinity").pod_affinity
    assert not make("kube-scheduler-tuned").pod_affinity and not make("trainmaster").pod_affinity


def test_affinity_pods_prefer_the_leaf_of_their_gang() -> None:
    gang = workload(40, seed=3)[0]
    plain = pod(gang, 0, "ns", "default-scheduler")
    assert "affinity" not in plain["spec"]
    body = pod(gang, 0, "ns", "default-scheduler", affinity=True)
    (term,) = body["spec"]["affinity"]["podAffinity"][
        "preferredDuringSchedulingIgnoredDuringExecution"]
    assert term["weight"] == 100
    assert term["podAffinityTerm"] == {
        "labelSelector": {"matchLabels": {"scheduling.x-k8s.io/pod-group": gang.name}},
        "topologyKey": "topology.trainmaster.io/leaf"}
    assert "podAntiAffinity" not in body["spec"]["affinity"]


def test_rounds_rotate_the_order() -> None:
    from trainmaster.bench._run import rotated

    names = ("a", "b", "c")
    assert [rotated(names, r) for r in range(4)] == [
        ("a", "b", "c"), ("b", "c", "a"), ("c", "a", "b"), ("a", "b", "c")]
    assert rotated((), 3) == ()


def test_percent_of_limit_is_the_time_ratio_to_nodecisions() -> None:
    from trainmaster.bench._run import with_percent_of_limit

    rows = with_percent_of_limit([
        ContenderResult("trainmaster", 4.0, 250.0, 1000, 0, 2),
        ContenderResult("kube-scheduler-nodecisions", 3.0, 333.3, 1000, 7, 40),
        ContenderResult("kube-scheduler-default", 30.0, 33.0, 900, 0, 30),  # not all bound
    ])
    assert [r.percent_of_limit for r in rows] == [75.0, 100.0, None]
    alone = with_percent_of_limit([ContenderResult("trainmaster", 4.0, 250.0, 1000, 0, 2)])
    assert alone[0].percent_of_limit is None


def test_placement_microbench_runs_on_a_small_cluster() -> None:
    from trainmaster.bench import placement_microbench

    result = placement_microbench(nodes=1000, gang=16, runs=3)
    assert result.nodes == 1000 and result.gang == 16 and result.runs == 3
    assert result.level in ("node", "leaf")  # 16 x 4 GPUs fits a leaf of 160
    assert 0 < result.warm_median_ms <= result.warm_max_ms


def test_the_default_seed_cannot_keep_every_gang_whole() -> None:
    """Why G = 2, not 0, is the best possible for the default workload: 1000 pods fill
    25 leaves of 40 exactly, and no 57 of its 58 gangs pack whole (exact search)."""
    from trainmaster.scheduler.placement.plan import exact_packing

    sizes = gang_sizes(1000, seed=1)
    assert exact_packing(sizes, [40] * 25, 10**6) == (None, True)  # finished, found none
    for size in set(sizes):
        rest = list(sizes)
        rest.remove(size)
        assert exact_packing(rest, [40] * 25, 10**6) == (None, True)


def test_rounds_combine_to_the_median_time_and_the_worst_placement() -> None:
    from trainmaster.bench._run import combine

    runs = [ContenderResult("trainmaster", s, 0.0, 1000, o, g, first_bind_seconds=s / 3)
            for s, o, g in ((3.0, 0, 2), (9.0, 0, 1), (4.0, 1, 2))]
    row = combine(runs)
    assert row.seconds == 4.0 and row.pods_per_second == 250.0
    assert (row.seconds_min, row.seconds_max, row.rounds) == (3.0, 9.0, 3)
    assert row.first_bind_seconds == round(4.0 / 3, 3)
    assert row.overcommitted_nodes == 1 and row.gangs_split_beyond_needed == 2
    assert row.rss_mb is None and row.peak_rss_mb is None  # no round measured it
    measured = [replace(r, rss_mb=m, peak_rss_mb=p)
                for r, m, p in zip(runs, (80.0, None, 95.5), (90.0, None, 120.0), strict=True)]
    row = combine(measured)
    assert (row.rss_mb, row.peak_rss_mb) == (95.5, 120.0)  # the largest of the rounds


def test_placement_at_scale_times_every_part_on_realistic_nodes() -> None:
    from trainmaster.bench import placement_at_scale
    from trainmaster.bench._placement import realistic_snapshot

    snap, pods = realistic_snapshot(200, pods_per_node=10, seed=3)
    assert pods == 2000 == sum(1 for _ in snap.pods())
    nodes = snap.nodes
    assert any(n.unschedulable for n in nodes) and any(len(n.taints) > 1 for n in nodes)
    assert {n.labels["nvidia.com/gpu.product"] for n in nodes} == {"A100", "H100"}
    gpus = sum(n.allocatable["nvidia.com/gpu"] for n in nodes)
    used = sum(snap.requested(n.name).get("nvidia.com/gpu", 0) for n in nodes)
    assert 0.4 < used / gpus < 0.6  # about half the GPUs in use
    result = placement_at_scale(nodes=300, gang=8, runs=3, cold_runs=2, events=20)
    out = result.to_json()
    assert list(out)[:5] == ["nodes", "cold_ms", "warm_ms", "node_event_ms", "rss_mb"]
    assert out["nodes"] == 300 and result.pods == 3000 and result.node_events >= 20
    assert result.level != "unschedulable"
    for median, (low, high) in ((result.cold_ms, result.cold_range_ms),
                                (result.warm_ms, result.warm_range_ms),
                                (result.node_event_ms, result.node_event_range_ms)):
        assert 0 < low <= median <= high
    assert result.rss_mb > 10


def test_bench_placement_cli_prints_one_json_object_and_refuses_bad_sizes(
    capsys: pytest.CaptureFixture[str],
) -> None:
    import json

    from trainmaster.cli import main

    code = main(["bench", "placement", "--nodes", "200", "--gang", "4", "--runs", "2",
                 "--cold-runs", "1", "--events", "10", "--json"])
    out = capsys.readouterr().out
    assert code == 0, out
    result = json.loads(out)
    assert result["nodes"] == 200
    assert {"cold_ms", "warm_ms", "node_event_ms", "rss_mb"} <= set(result)
    assert main(["bench", "placement", "--nodes", "0"]) == 2
    assert "--nodes must be at least 1" in capsys.readouterr().err


def test_upstream_variant_names_the_same_gangs_and_gets_the_same_shape() -> None:
    """trainmaster-upstream's gangs: upstream PodGroups, pods naming them in
    spec.schedulingGroup (not the label), and the scheduler assembles each into the gang
    the scheduler-plugins variant gives: same members, minimum and topology."""
    from trainmaster.bench._workload import upstream_pod_group
    from trainmaster.scheduler.runtime.convert import pod_group_info, pod_info
    from trainmaster.scheduler.runtime.gangs import Waiting, assemble
    from trainmaster.scheduler.runtime.upstream_groups import upstream_group_info

    assert "trainmaster-upstream" not in BenchOptions().contenders()
    assert BenchOptions(only=("trainmaster-upstream", "trainmaster")).contenders() == (
        "trainmaster", "trainmaster-upstream")
    upstream = make("trainmaster-upstream")
    assert isinstance(upstream, Trainmaster) and upstream.upstream_groups
    assert not make("trainmaster").upstream_groups
    ctx = RunContext(Path("/k"), "ns", Path("/w"), 64)
    config = SchedulerConfig.from_mapping(upstream.config(ctx))
    for gang in workload(1000, seed=1):
        group = upstream_pod_group(gang, "ns")
        assert group["apiVersion"] == "scheduling.k8s.io/v1beta1"
        assert group["spec"] == {"schedulingPolicy": {"gang": {"minCount": gang.size}}}
        up_pods = [pod(gang, i, "ns", "trainmaster-scheduler", upstream=True)
                   for i in range(gang.size)]
        assert all("scheduling.x-k8s.io/pod-group" not in p["metadata"]["labels"]
                   and p["spec"]["schedulingGroup"] == {"podGroupName": gang.name}
                   for p in up_pods)
        group["metadata"]["uid"] = "u"
        up = assemble(f"ns/scheduling.k8s.io:{gang.name}",
                      upstream_group_info(group, config.levels),
                      [pod_info({**p, "metadata": {**p["metadata"], "uid": str(i)}}).request
                       for i, p in enumerate(up_pods)], [], config)
        plain = [pod(gang, i, "ns", "trainmaster-scheduler") for i in range(gang.size)]
        plugins = assemble(f"ns/{gang.name}", pod_group_info(pod_group(gang, "ns")),
                           [pod_info({**p, "metadata": {**p["metadata"], "uid": str(i)}}
                                     ).request for i, p in enumerate(plain)], [], config)
        assert not isinstance(up, Waiting) and not isinstance(plugins, Waiting)
        assert (up.topology, up.required_members, [m.name for m in up.members]) == (
            plugins.topology, plugins.required_members, [m.name for m in plugins.members])
