"""fragmentation_report on hand-built states (2 spines x 2 leaves x 4 nodes x 8 GPUs)."""

from __future__ import annotations

import pytest

from trainmaster.scheduler import ClusterState
from trainmaster.scheduler.state.fragmentation import fragmentation_report

from .builders import make_cluster, make_node, make_pod


def with_usage(used: dict[str, int]) -> ClusterState:
    snap = make_cluster()
    for node, gpus in used.items():
        snap.assume(make_pod(f"use-{node}", gpus=gpus), node)
    return snap


@pytest.mark.parametrize(
    ("used", "free", "whole_nodes", "whole_leaves", "ratio", "leaf_ratio"),
    [
        ({}, 128, 16, 4, 0.0, 0.0),
        ({"s0-l0-n0": 4}, 124, 15, 3, 4 / 124, 28 / 124),
        ({"s0-l0-n0": 8}, 120, 15, 3, 0.0, 24 / 120),
        ({"s0-l0-n0": 4, "s1-l1-n3": 2}, 122, 14, 2, 10 / 122, 58 / 122),
        (
            {f"s{s}-l{leaf}-n{n}": 8 for s in (0, 1) for leaf in (0, 1) for n in range(4)},
            0,
            0,
            0,
            0.0,
            0.0,
        ),
    ],
    ids=["empty", "half-node", "full-node", "two-partial", "full-cluster"],
)
def test_report(
    used: dict[str, int],
    free: int,
    whole_nodes: int,
    whole_leaves: int,
    ratio: float,
    leaf_ratio: float,
) -> None:
    report = fragmentation_report(with_usage(used))
    assert report.total == 128
    assert report.free == free
    assert report.nodes == 16
    assert report.fully_free_nodes == whole_nodes
    assert report.leaves == 4
    assert report.fully_free_leaves == whole_leaves
    assert report.fragmentation_ratio == pytest.approx(ratio)
    assert report.leaf_fragmentation_ratio == pytest.approx(leaf_ratio)
    assert sum(report.free_per_leaf.values()) == free


def test_free_per_leaf() -> None:
    report = fragmentation_report(with_usage({"s0-l1-n0": 4, "s0-l1-n1": 8}))
    assert dict(report.free_per_leaf) == {
        "spine-0/leaf-0": 32,
        "spine-0/leaf-1": 20,
        "spine-1/leaf-0": 32,
        "spine-1/leaf-1": 32,
    }
    assert report.largest_free_node == 8


def test_cordoned_and_gpu_less_nodes_do_not_count() -> None:
    nodes = [make_node("a"), make_node("b", unschedulable=True), make_node("cpu", gpus=0)]
    report = fragmentation_report(ClusterState(nodes))
    assert (report.total, report.free, report.nodes) == (8, 8, 1)
    assert report.leaves == 0
    assert report.free_per_leaf == {}


def test_without_levels_leaf_ratio_equals_node_ratio() -> None:
    snap = ClusterState([make_node("a"), make_node("b")])
    snap.assume(make_pod("p", gpus=2), "a")
    report = fragmentation_report(snap)
    assert report.fragmentation_ratio == pytest.approx(6 / 14)
    assert report.leaf_fragmentation_ratio == report.fragmentation_ratio


def test_other_resource() -> None:
    snap = ClusterState([make_node("a", cpu=10_000)])
    snap.assume(make_pod("p", gpus=0, cpu=4_000), "a")
    report = fragmentation_report(snap, "cpu")
    assert (report.total, report.free, report.fully_free_nodes) == (10_000, 6_000, 0)
    assert report.fragmentation_ratio == 1.0
