"""ClusterState: the pod state machine and domain accounting."""

from __future__ import annotations

import pytest

from trainmaster.scheduler import (
    DEFAULT_FILTERS,
    GPU,
    PODS,
    ClusterState,
    Code,
    Placement,
    Unschedulable,
    place_gang,
)
from trainmaster.scheduler.state.views import OvercommitError, PodState

from .builders import LEVELS, make_cluster, make_gang, make_node, make_pod


def leaf_free(snap: ClusterState, leaf: str) -> int:
    return next(d.free.get(GPU, 0) for d in snap.domains("leaf") if d.name == leaf)


def test_assume_charges_node_and_domains() -> None:
    snap = make_cluster()
    pod = make_pod("p", gpus=4)
    snap.assume(pod, "s0-l1-n2")
    assert snap.pod_state(pod.uid) is PodState.ASSUMED
    assert snap.pod_node(pod.uid) == "s0-l1-n2"
    assert snap.free("s0-l1-n2")[GPU] == 4
    assert snap.requested("s0-l1-n2")[PODS] == 1
    assert leaf_free(snap, "spine-0/leaf-1") == 28
    assert leaf_free(snap, "spine-0/leaf-0") == 32
    spine = {d.name: d.free[GPU] for d in snap.domains("spine")}
    assert spine == {"spine-0": 60, "spine-1": 64}
    assert snap.domains("cluster")[0].free[GPU] == 124


def test_forget_restores_everything() -> None:
    snap = make_cluster()
    before = [(d.name, dict(d.free)) for d in snap.domains("leaf")]
    free_before = dict(snap.free("s0-l0-n0"))
    pod = make_pod("p", gpus=8, gang="g")
    snap.assume(pod, "s0-l0-n0")
    assert snap.placed_members("default/g") == 1
    snap.forget(pod.uid)
    assert snap.pod_state(pod.uid) is None
    assert dict(snap.free("s0-l0-n0")) == free_before
    assert [(d.name, dict(d.free)) for d in snap.domains("leaf")] == before
    assert snap.placed_members("default/g") == 0


def test_confirm_then_remove() -> None:
    snap = make_cluster()
    pod = make_pod("p", gpus=2)
    snap.assume(pod, "s1-l1-n3")
    snap.confirm(pod.uid)
    assert snap.pod_state(pod.uid) is PodState.BOUND
    with pytest.raises(ValueError):
        snap.forget(pod.uid)  # bound pods are not forgotten, they are removed
    snap.remove(pod.uid)
    assert snap.pod_state(pod.uid) is None
    assert snap.free("s1-l1-n3")[GPU] == 8


@pytest.mark.parametrize(
    ("op", "error"),
    [("forget", ValueError), ("confirm", ValueError), ("remove", KeyError)],
    ids=["forget-unknown", "confirm-unknown", "remove-unknown"],
)
def test_invalid_transitions(op: str, error: type[Exception]) -> None:
    snap = make_cluster()
    with pytest.raises(error):
        getattr(snap, op)("nope")


def test_assume_twice_is_refused() -> None:
    snap = make_cluster()
    pod = make_pod("p", gpus=1)
    snap.assume(pod, "s0-l0-n0")
    with pytest.raises(ValueError):
        snap.assume(pod, "s0-l0-n1")


@pytest.mark.parametrize(
    ("first", "second", "ok"),
    [(4, 4, True), (4, 5, False), (8, 1, False), (0, 8, True)],
    ids=["fills-exactly", "one-over", "full-node", "cpu-only-first"],
)
def test_assume_never_overcommits(first: int, second: int, ok: bool) -> None:
    snap = ClusterState([make_node("n")])
    snap.assume(make_pod("a", gpus=first), "n")
    if ok:
        snap.assume(make_pod("b", gpus=second), "n")
    else:
        with pytest.raises(OvercommitError):
            snap.assume(make_pod("b", gpus=second), "n")
        assert snap.pod_state("default/b") is None
    assert snap.free("n")[GPU] >= 0


def test_add_bound_confirms_and_moves() -> None:
    snap = make_cluster()
    pod = make_pod("p", gpus=4)
    snap.assume(pod, "s0-l0-n0")
    snap.add_bound(pod, "s1-l0-n0")  # the API says it landed elsewhere
    assert snap.pod_state(pod.uid) is PodState.BOUND
    assert snap.pod_node(pod.uid) == "s1-l0-n0"
    assert snap.free("s0-l0-n0")[GPU] == 8
    assert snap.free("s1-l0-n0")[GPU] == 4


def test_add_bound_from_initial_can_exceed_allocatable() -> None:
    snap = ClusterState([make_node("n")], ())
    snap.add_bound(make_pod("a", gpus=8), "n")
    snap.add_bound(make_pod("b", gpus=4), "n")  # reality wins
    assert snap.free("n")[GPU] == -4
    assert snap.domains("cluster")[0].free.get(GPU, 0) == 0  # never negative


def test_untracked_requested_counts() -> None:
    snap = ClusterState([make_node("n", requested={GPU: 6})])
    assert snap.free("n")[GPU] == 2
    assert snap.domains("cluster")[0].capacity[GPU] == 2


def test_set_node_cordon_keeps_pods_and_updates_domains() -> None:
    snap = make_cluster()
    pod = make_pod("p", gpus=4)
    snap.assume(pod, "s0-l0-n0")
    node = snap.node("s0-l0-n0")
    cordoned = make_node(node.name, topology=node.topology, unschedulable=True)
    snap.set_node(cordoned)
    assert snap.pod_node(pod.uid) == "s0-l0-n0"
    assert leaf_free(snap, "spine-0/leaf-0") == 24  # cordoned node no longer counts
    for i in range(16):  # fill everything placeable: the cordoned node is never used
        result = place_gang(snap, make_gang(f"g{i}", 1, gpus=4))
        if not isinstance(result, Placement):
            break
        assert result.bindings[0].node != "s0-l0-n0"
        snap.assume(result.bindings[0].pod, result.bindings[0].node)
    snap.set_node(make_node("new", topology=("spine-9", "leaf-0")))
    assert snap.domain_of("new", "spine") == "spine-9"
    assert snap.pod_node(pod.uid) == "s0-l0-n0"


def test_copy_is_independent() -> None:
    snap = make_cluster()
    clone = snap.copy()
    clone.assume(make_pod("p", gpus=8), "s0-l0-n0")
    assert snap.free("s0-l0-n0")[GPU] == 8
    assert clone.free("s0-l0-n0")[GPU] == 0


@pytest.mark.parametrize(
    ("levels", "topology"),
    [(("node",), ()), (("spine", "spine"), ()), (LEVELS, ("a", "b", "c"))],
    ids=["reserved-name", "duplicate-level", "path-too-deep"],
)
def test_bad_topology_rejected(levels: tuple[str, ...], topology: tuple[str, ...]) -> None:
    with pytest.raises(ValueError):
        ClusterState([make_node("n", topology=topology)], levels)


def test_short_path_is_outside_lower_levels() -> None:
    nodes = [make_node("a", topology=("spine-0", "leaf-0")), make_node("b", topology=("spine-0",))]
    snap = ClusterState(nodes, LEVELS)
    assert snap.domain_of("b", "leaf") is None
    assert snap.domain_of("b", "spine") == "spine-0"
    assert [d.nodes for d in snap.domains("leaf")] == [("a",)]


# --- read API by index ----------------------------------------------------------------


def test_columns_are_live_and_in_name_order() -> None:
    snap = make_cluster()
    cols = snap.columns
    assert [n.name for n in cols.nodes] == sorted(n.name for n in snap.nodes)
    (i,) = snap.indices(["s0-l1-n2", "no-such-node"])
    assert cols.nodes[i].name == "s0-l1-n2"
    snap.assume(make_pod("p", gpus=4), "s0-l1-n2")
    assert cols.free[i][GPU] == 4 == snap.free("s0-l1-n2")[GPU]
    assert cols.requested[i][GPU] == 4
    assert cols.capacity[i][GPU] == 8  # "if every tracked pod left"
    assert cols.allocatable[i][GPU] == 8
    assert all(cols.schedulable)
    assert i in snap.gpu_buckets[4]
    assert snap.max_capacity[GPU] == 8


def test_live_domains_match_the_copies() -> None:
    snap = make_cluster()
    snap.assume(make_pod("p", gpus=4), "s0-l1-n2")
    for level in ("leaf", "spine", "cluster"):
        live = snap.live_domains(snap.rank(level))
        copies = snap.domains(level)
        assert [d.name for d in live] == [d.name for d in copies]
        assert [dict(d.free) for d in live] == [dict(d.free) for d in copies]
        assert [tuple(snap.nodes[i].name for i in d.nodes) for d in live] == [
            d.nodes for d in copies
        ]
    assert list(snap.live_domains(0)) == []  # single nodes: see columns
    with pytest.raises(ValueError, match="rank"):
        snap.live_domains(snap.rank("cluster") + 1)


def test_replace_nodes_is_set_node_for_many() -> None:
    one_by_one, at_once = make_cluster(), make_cluster()
    for snap in (one_by_one, at_once):
        snap.assume(make_pod("p", gpus=4), "s0-l0-n0")
    cordon = [
        make_node(n.name, topology=n.topology, unschedulable=True)
        for n in one_by_one.nodes
        if n.name.startswith("s0-l0")
    ]
    for node in cordon:
        one_by_one.set_node(node)
    changed = {n.name: n for n in at_once.nodes} | {n.name: n for n in cordon}
    at_once.replace_nodes(changed.values())
    assert at_once.nodes == one_by_one.nodes
    assert at_once.domains("leaf") == one_by_one.domains("leaf")
    assert at_once.pod_node("default/p") == "s0-l0-n0"


def test_eligibility_is_cached_until_a_node_changes() -> None:
    snap = ClusterState([make_node("a"), make_node("b", labels={"pool": "x"})])
    pod = make_pod("p", selector={"pool": "x"})
    first = snap.eligibility(pod, DEFAULT_FILTERS)
    assert first.mask == bytes([0, 1])
    assert first.reasons[0] == "node(s) didn't match Pod's node selector"
    assert snap.eligibility(pod, DEFAULT_FILTERS) is first
    snap.set_node(make_node("a", labels={"pool": "x"}))
    assert snap.eligibility(pod, DEFAULT_FILTERS).mask == bytes([1, 1])


def test_a_failed_gangs_explanation_follows_pod_and_node_changes() -> None:
    """The explanation is memoised (``ClusterState.memo``/``static_memo``): a pod or
    node change must show in the next one."""
    snap = make_cluster()
    for leaf in ("s0-l0", "s0-l1", "s1-l0", "s1-l1"):
        for k in range(3):
            snap.add_bound(make_pod(f"{leaf}-{k}", gpus=8), f"{leaf}-n{k}")
    gang = make_gang("three", 3, gpus=8, level="leaf", mode="required")
    first = place_gang(snap, gang)
    assert isinstance(first, Unschedulable) and first.code is Code.UNSCHEDULABLE
    assert "has 8 free" in first.reason and "4/16 nodes fit" in first.reason
    snap.remove(make_pod("s0-l0-0", gpus=8).uid)
    again = place_gang(snap, gang)
    assert isinstance(again, Unschedulable)
    assert "best leaf spine-0/leaf-0 has 16 free" in again.reason
    assert "5/16 nodes fit" in again.reason
    # Five pods of 8 GPUs never fit a leaf of four nodes, until the leaf gets a fifth.
    five = make_gang("five", 5, gpus=8, level="leaf", mode="required")
    never = place_gang(snap, five)
    assert isinstance(never, Unschedulable)
    assert never.code is Code.UNSCHEDULABLE_AND_UNRESOLVABLE
    snap.set_node(make_node("s0-l0-n9", topology=("spine-0", "leaf-0")))
    later = place_gang(snap, five)
    assert isinstance(later, Unschedulable) and later.code is Code.UNSCHEDULABLE
