"""place_gang: smallest domain, best fit, constraints, all-or-nothing, scale."""

from __future__ import annotations

import random
from collections import Counter
from collections.abc import Mapping
from typing import ClassVar

import pytest

from trainmaster.scheduler import (
    CPU,
    GPU,
    ClusterState,
    Code,
    CycleState,
    Gang,
    NodeInfo,
    Placement,
    Unschedulable,
    place_gang,
)
from trainmaster.scheduler.state.fragmentation import fragmentation_report

from .builders import LEVELS, fabric_nodes, make_cluster, make_gang, make_node, make_pod


def placed(result: Placement | Unschedulable) -> Placement:
    assert isinstance(result, Placement), getattr(result, "reason", result)
    return result


def assume_all(snap: ClusterState, placement: Placement) -> None:
    for b in placement.bindings:
        snap.assume(b.pod, b.node)


def fill(snap: ClusterState, node: str, gpus: int, name: str | None = None) -> None:
    """Charge ``gpus`` GPUs to ``node`` through a lone assumed pod."""
    snap.assume(make_pod(name or f"fill-{node}-{gpus}", gpus=gpus, cpu=0, memory=0), node)


# 2 spines x 2 leaves x 4 nodes x 8 GPUs: node 8, leaf 32, spine 64, cluster 128 GPUs.
@pytest.mark.parametrize(
    ("size", "gpus", "level"),
    [
        (1, 4, "node"),
        (2, 4, "node"),
        (1, 8, "node"),
        (3, 4, "leaf"),
        (4, 8, "leaf"),
        (5, 8, "spine"),
        (8, 8, "spine"),
        (9, 8, "cluster"),
        (16, 8, "cluster"),
    ],
    ids=["1x4", "2x4", "1x8", "3x4", "4x8", "5x8", "8x8", "9x8", "16x8"],
)
def test_smallest_domain_that_fits(size: int, gpus: int, level: str) -> None:
    snap = make_cluster()
    result = placed(place_gang(snap, make_gang("g", size, gpus=gpus)))
    assert result.level == level
    domains = {snap.domain_of(b.node, level) for b in result.bindings}
    assert domains == {result.domain}
    assert len(result.bindings) == size


def test_too_big_for_cluster() -> None:
    result = place_gang(make_cluster(), make_gang("g", 17, gpus=8))
    assert isinstance(result, Unschedulable)
    assert result.code is Code.UNSCHEDULABLE_AND_UNRESOLVABLE


@pytest.mark.parametrize(
    ("used", "gpus", "expected"),
    [
        ({"a": 4, "b": 0, "c": 6}, 2, "c"),
        ({"a": 4, "b": 0, "c": 6}, 4, "a"),
        ({"a": 4, "b": 0, "c": 6}, 8, "b"),
        ({"a": 0, "b": 0, "c": 0}, 4, "a"),
    ],
    ids=["tightest-2", "tightest-4", "only-empty-fits", "tie-by-name"],
)
def test_best_fit_node(used: dict[str, int], gpus: int, expected: str) -> None:
    snap = ClusterState([make_node(n) for n in used])
    for node, gpus_used in used.items():
        if gpus_used:
            fill(snap, node, gpus_used)
    result = placed(place_gang(snap, make_gang("g", 1, gpus=gpus)))
    assert result.level == "node"
    assert result.bindings[0].node == expected


class Spread:
    """A custom score plugin: most free GPUs first (the opposite of best fit)."""

    NAME: ClassVar[str] = "Spread"

    def score(self, state: CycleState, gang: Gang, node: NodeInfo,
              requests: Mapping[str, int], free: Mapping[str, int]) -> int:
        return free.get(GPU, 0)


@pytest.mark.parametrize(
    ("size", "expected"),
    [(1, Counter({"b": 1})), (3, Counter({"b": 2, "a": 1}))],
    ids=["one-pod-node-level", "three-pods-leaf-level"],
)
def test_custom_scorer_orders_nodes(size: int, expected: Counter[str]) -> None:
    snap = ClusterState([make_node(n, topology=("s", "l")) for n in "ab"], LEVELS)
    fill(snap, "a", 4)
    result = placed(place_gang(snap, make_gang("g", size, gpus=4), scorer=Spread()))
    assert Counter(b.node for b in result.bindings) == expected


def test_best_fit_packing_inside_domain() -> None:
    nodes = [make_node(f"n{i}", topology=("s", "l")) for i in range(4)]
    snap = ClusterState(nodes, LEVELS)
    fill(snap, "n1", 4)
    fill(snap, "n3", 6)
    # 3 x 4 GPUs = 12 > 8: not one node; tightest first: n1 (4 free) then n0 (8 free).
    result = placed(place_gang(snap, make_gang("g", 3, gpus=4)))
    assert result.level == "leaf"
    assert Counter(b.node for b in result.bindings) == {"n1": 1, "n0": 2}


def test_best_fit_domain_keeps_whole_leaves_free() -> None:
    snap = make_cluster()
    fill(snap, "s1-l0-n0", 8)
    fill(snap, "s1-l0-n1", 8)  # s1/l0 has 16 free, every other leaf 32
    before = fragmentation_report(snap)
    result = placed(place_gang(snap, make_gang("g", 2, gpus=8)))
    assert (result.level, result.domain) == ("leaf", "spine-1/leaf-0")
    after = fragmentation_report(snap)
    assert before.fully_free_leaves == after.fully_free_leaves == 3


def test_best_fit_domain_is_least_free_not_first() -> None:
    snap = make_cluster()
    for leaf, used in (("s0-l0", 8), ("s0-l1", 16), ("s1-l0", 0), ("s1-l1", 12)):
        for i in range(used // 4):
            fill(snap, f"{leaf}-n{i}", 4, f"{leaf}-fill-{i}")
    result = placed(place_gang(snap, make_gang("g", 4, gpus=4)))  # 16 GPUs
    assert result.domain == "spine-0/leaf-1"  # exactly 16 free: nothing left over


def test_required_fails_with_clear_reason() -> None:
    snap = make_cluster()
    for leaf in ("s0-l0", "s0-l1", "s1-l0", "s1-l1"):
        fill(snap, f"{leaf}-n0", 4)  # every leaf: 28 free
    gang = make_gang("big", 4, gpus=8, level="leaf", mode="required")
    result = place_gang(snap, gang)
    assert isinstance(result, Unschedulable)
    assert result.code is Code.UNSCHEDULABLE  # would fit once pods finish
    assert result.gang == "default/big"
    assert "default/big" in result.reason
    assert "leaf" in result.reason
    assert "28 free nvidia.com/gpu" in result.reason
    assert "needs 32" in result.reason


def test_required_never_fits_is_unresolvable() -> None:
    gang = make_gang("huge", 5, gpus=8, level="leaf", mode="required")
    result = place_gang(make_cluster(), gang)
    assert isinstance(result, Unschedulable)
    assert result.code is Code.UNSCHEDULABLE_AND_UNRESOLVABLE
    assert "32 free nvidia.com/gpu, needs 40" in result.reason


def test_preferred_falls_back_to_larger_domain() -> None:
    snap = make_cluster()
    for leaf in ("s0-l0", "s0-l1", "s1-l0", "s1-l1"):
        fill(snap, f"{leaf}-n0", 4)
    gang = make_gang("big", 4, gpus=8, level="leaf", mode="preferred")
    result = placed(place_gang(snap, gang))
    assert result.level == "spine"


@pytest.mark.parametrize(
    ("level", "size", "ok"),
    [("node", 1, True), ("node", 2, False), ("leaf", 4, True), ("spine", 8, True)],
    ids=["node-1", "node-2", "leaf-4", "spine-8"],
)
def test_required_levels(level: str, size: int, ok: bool) -> None:
    snap = make_cluster()
    result = place_gang(snap, make_gang("g", size, gpus=8, level=level, mode="required"))
    assert isinstance(result, Placement) is ok
    if isinstance(result, Placement):
        assert len({snap.domain_of(b.node, level) for b in result.bindings}) == 1


def test_no_partial_placement_and_no_mutation() -> None:
    snap = make_cluster(1, 1, 2)
    free_before = {n.name: dict(snap.free(n.name)) for n in snap.nodes}
    result = place_gang(snap, make_gang("g", 5, gpus=4))  # 20 GPUs > 16
    assert isinstance(result, Unschedulable)
    ok = placed(place_gang(snap, make_gang("h", 4, gpus=4)))
    assert len(ok.bindings) == 4
    assert {n.name: dict(snap.free(n.name)) for n in snap.nodes} == free_before
    assert list(snap.pods()) == []


def test_min_member_waits_for_members() -> None:
    gang = make_gang("g", 2, min_member=4)
    result = place_gang(make_cluster(), gang)
    assert isinstance(result, Unschedulable)
    assert result.code is Code.WAIT
    assert "2 of minMember 4" in result.reason


def test_unknown_level_is_unresolvable() -> None:
    result = place_gang(make_cluster(), make_gang("g", 1, level="rack", mode="required"))
    assert isinstance(result, Unschedulable)
    assert result.code is Code.UNSCHEDULABLE_AND_UNRESOLVABLE
    assert "rack" in result.reason


def test_mixed_gang_in_one_leaf() -> None:
    members = (
        make_pod("g-big", gpus=8, gang="g"),
        make_pod("g-a", gpus=4, gang="g"),
        make_pod("g-b", gpus=4, gang="g"),
        make_pod("g-c", gpus=2, gang="g"),
    )
    snap = make_cluster()
    result = placed(place_gang(snap, Gang("g", members)))
    assert result.level == "leaf"
    assume_all(snap, result)
    assert all(snap.free(n.name)[GPU] >= 0 for n in snap.nodes)


def test_blocked_nodes_are_avoided() -> None:
    snap = make_cluster()
    blocked = {n.name for n in snap.nodes if n.topology[0] == "spine-0"}
    result = placed(place_gang(snap, make_gang("g", 4, gpus=8), blocked=blocked))
    assert result.domain.startswith("spine-1/")


def test_cpu_only_pods_pack_by_cpu() -> None:
    snap = ClusterState([make_node("a", cpu=16_000), make_node("b", cpu=8_000)])
    result = placed(place_gang(snap, make_gang("g", 1, gpus=0, cpu=4_000)))
    assert result.bindings[0].node == "b"
    assert snap.free("b")[CPU] == 8_000  # place_gang does not assume


def test_rdma_resource_only_where_present() -> None:
    nodes = [make_node("plain"), make_node("rdma", extra={"rdma/rail0": 1})]
    snap = ClusterState(nodes)
    gang = Gang("g", (make_pod("g-0", gpus=1, extra={"rdma/rail0": 1}, gang="g"),))
    assert placed(place_gang(snap, gang)).bindings[0].node == "rdma"
    two = Gang("h", tuple(make_pod(f"h-{i}", extra={"rdma/rail0": 1}, gang="h") for i in range(2)))
    assert isinstance(place_gang(snap, two), Unschedulable)


def test_pods_resource_limits_density() -> None:
    snap = ClusterState([make_node("a", pods=2)])
    assert isinstance(place_gang(snap, make_gang("g", 3, gpus=1)), Unschedulable)
    assert isinstance(place_gang(snap, make_gang("g", 2, gpus=1)), Placement)


def test_thousand_pods_on_five_hundred_nodes() -> None:
    """5 spines x 5 leaves x 20 nodes x 8 GPUs; 1000 pods x 4 GPUs in gangs of 1..32."""
    snap = ClusterState(fabric_nodes(5, 5, 20), LEVELS)
    rng = random.Random(7)
    gangs: list[Gang] = []
    total = 0
    while total < 1000:
        size = min(rng.randint(1, 32), 1000 - total)
        gangs.append(make_gang(f"g{len(gangs)}", size, gpus=4))
        total += size
    pods_placed = 0
    levels: Counter[str] = Counter()
    for gang in gangs:
        result = place_gang(snap, gang)
        if isinstance(result, Placement):
            assert len(result.bindings) == len(gang.members)
            assume_all(snap, result)
            pods_placed += len(result.bindings)
            levels[result.level] += 1
            level_domains = {snap.domain_of(b.node, result.level) for b in result.bindings}
            assert level_domains == {result.domain}
    for node in snap.nodes:
        for resource, qty in snap.requested(node.name).items():
            assert qty <= node.allocatable.get(resource, 0)
    assert pods_placed == 1000  # demand equals supply; topology-aware packing leaves no gaps
    assert fragmentation_report(snap).free == 0
    # Only the last gangs, squeezed into the final gaps, may need to span domains.
    assert levels["spine"] + levels["cluster"] <= 5
    assert levels["node"] + levels["leaf"] >= len(gangs) - 5
