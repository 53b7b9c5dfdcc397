"""Each filter plugin on its own, table-driven."""

from __future__ import annotations

from typing import Any

import pytest

from trainmaster.scheduler import (
    GPU,
    ClusterState,
    Code,
    NodeSelectorRequirement,
    Placement,
    SelectorOperator,
    Taint,
    TaintEffect,
    Toleration,
    TolerationOperator,
    Unschedulable,
    fit_count,
    place_gang,
)
from trainmaster.scheduler.plugins.node_affinity import NodeAffinity
from trainmaster.scheduler.plugins.node_selector import NodeSelector
from trainmaster.scheduler.plugins.node_unschedulable import NodeUnschedulable
from trainmaster.scheduler.plugins.resources_fit import NodeResourcesFit
from trainmaster.scheduler.plugins.taint_toleration import TaintToleration

from .builders import make_gang, make_node, make_pod

GPU_TAINT = Taint("nvidia.com/gpu", "present", TaintEffect.NO_SCHEDULE)


@pytest.mark.parametrize(
    ("taints", "tolerations", "ok"),
    [
        ((), (), True),
        ((GPU_TAINT,), (), False),
        ((GPU_TAINT,), (Toleration("nvidia.com/gpu", TolerationOperator.EQUAL, "present"),), True),
        ((GPU_TAINT,), (Toleration("nvidia.com/gpu", TolerationOperator.EQUAL, "other"),), False),
        ((GPU_TAINT,), (Toleration("nvidia.com/gpu", TolerationOperator.EXISTS),), True),
        ((GPU_TAINT,), (Toleration(operator=TolerationOperator.EXISTS),), True),
        (
            (GPU_TAINT,),
            (
                Toleration(
                    "nvidia.com/gpu", TolerationOperator.EXISTS, effect=TaintEffect.NO_EXECUTE
                ),
            ),
            False,
        ),
        ((Taint("maint", "", TaintEffect.NO_EXECUTE),), (), False),
        ((Taint("soft", "", TaintEffect.PREFER_NO_SCHEDULE),), (), True),
        (
            (GPU_TAINT, Taint("maint", "", TaintEffect.NO_EXECUTE)),
            (Toleration("nvidia.com/gpu", TolerationOperator.EXISTS),),
            False,
        ),
    ],
    ids=[
        "no-taints",
        "untolerated-noschedule",
        "equal-match",
        "equal-wrong-value",
        "exists-key",
        "exists-everything",
        "wrong-effect",
        "untolerated-noexecute",
        "prefer-noschedule-ignored",
        "one-of-two-tolerated",
    ],
)
def test_taint_toleration(
    taints: tuple[Taint, ...], tolerations: tuple[Toleration, ...], ok: bool
) -> None:
    status = TaintToleration().filter(make_pod(tolerations=tolerations), make_node(taints=taints))
    assert status.is_success() is ok
    if not ok:
        assert status.code is Code.UNSCHEDULABLE_AND_UNRESOLVABLE
        assert status.plugin == TaintToleration.NAME
        assert status.message.startswith(TaintToleration.ERR_REASON)


@pytest.mark.parametrize(
    ("selector", "labels", "ok"),
    [
        ({}, {}, True),
        ({"gpu": "h100"}, {"gpu": "h100", "zone": "a"}, True),
        ({"gpu": "h100"}, {"gpu": "a100"}, False),
        ({"gpu": "h100"}, {}, False),
        ({"gpu": "h100", "zone": "a"}, {"gpu": "h100", "zone": "b"}, False),
    ],
    ids=["empty", "match", "wrong-value", "missing-label", "one-of-two-wrong"],
)
def test_node_selector(selector: dict[str, str], labels: dict[str, str], ok: bool) -> None:
    status = NodeSelector().filter(make_pod(selector=selector), make_node(labels=labels))
    assert status.is_success() is ok
    if not ok:
        assert status.message == NodeSelector.ERR_REASON


IN_H100 = NodeSelectorRequirement("gpu", SelectorOperator.IN, ("h100", "h200"))
NOT_IN_A100 = NodeSelectorRequirement("gpu", SelectorOperator.NOT_IN, ("a100",))
HAS_IB = NodeSelectorRequirement("ib", SelectorOperator.EXISTS)
NO_SPOT = NodeSelectorRequirement("spot", SelectorOperator.DOES_NOT_EXIST)


@pytest.mark.parametrize(
    ("exprs", "labels", "ok"),
    [
        ((), {}, True),
        ((IN_H100,), {"gpu": "h200"}, True),
        ((IN_H100,), {"gpu": "a100"}, False),
        ((IN_H100,), {}, False),
        ((NOT_IN_A100,), {"gpu": "h100"}, True),
        ((NOT_IN_A100,), {}, True),
        ((NOT_IN_A100,), {"gpu": "a100"}, False),
        ((HAS_IB,), {"ib": ""}, True),
        ((HAS_IB,), {}, False),
        ((NO_SPOT,), {}, True),
        ((NO_SPOT,), {"spot": "true"}, False),
        ((IN_H100, HAS_IB, NO_SPOT), {"gpu": "h100", "ib": "ndr"}, True),
        ((IN_H100, HAS_IB, NO_SPOT), {"gpu": "h100", "ib": "ndr", "spot": "1"}, False),
    ],
    ids=[
        "none",
        "in-match",
        "in-other",
        "in-missing",
        "notin-other",
        "notin-missing",
        "notin-match",
        "exists",
        "exists-missing",
        "dne",
        "dne-present",
        "and-all",
        "and-one-fails",
    ],
)
def test_node_affinity(
    exprs: tuple[NodeSelectorRequirement, ...], labels: dict[str, str], ok: bool
) -> None:
    status = NodeAffinity().filter(make_pod(affinity=exprs), make_node(labels=labels))
    assert status.is_success() is ok


@pytest.mark.parametrize(
    ("operator", "values"),
    [(SelectorOperator.IN, ()), (SelectorOperator.EXISTS, ("x",))],
    ids=["in-without-values", "exists-with-values"],
)
def test_affinity_requirement_validates(
    operator: SelectorOperator, values: tuple[str, ...]
) -> None:
    with pytest.raises(ValueError):
        NodeSelectorRequirement("k", operator, values)


@pytest.mark.parametrize(
    ("cordoned", "ok"), [(False, True), (True, False)], ids=["open", "cordoned"]
)
def test_node_unschedulable(cordoned: bool, ok: bool) -> None:
    status = NodeUnschedulable().filter(make_pod(), make_node(unschedulable=cordoned))
    assert status.is_success() is ok
    if not ok:
        assert status.code is Code.UNSCHEDULABLE_AND_UNRESOLVABLE


@pytest.mark.parametrize(
    ("pod_gpus", "used_gpus", "extra", "ok", "reason"),
    [
        (4, 0, None, True, ""),
        (4, 4, None, True, ""),
        (4, 5, None, False, "Insufficient nvidia.com/gpu"),
        (0, 8, None, True, ""),
        (1, 0, {"rdma/rail0": 1}, False, "Insufficient rdma/rail0"),
    ],
    ids=["empty-node", "exactly-full", "one-short", "cpu-only-pod", "missing-rdma"],
)
def test_node_resources_fit(
    pod_gpus: int, used_gpus: int, extra: dict[str, int] | None, ok: bool, reason: str
) -> None:
    pod = make_pod(gpus=pod_gpus, extra=extra)
    status = NodeResourcesFit().filter(pod, make_node(), {GPU: used_gpus})
    assert status.is_success() is ok
    if not ok:
        assert status.code is Code.UNSCHEDULABLE
        assert status.message == reason


@pytest.mark.parametrize(
    ("requests", "free", "expected"),
    [
        ({GPU: 4, "pods": 1}, {GPU: 8, "pods": 110}, 2),
        ({GPU: 4, "pods": 1}, {GPU: 8, "pods": 1}, 1),
        ({GPU: 3}, {GPU: 8}, 2),
        ({GPU: 1, "rdma/rail0": 1}, {GPU: 8}, 0),
        ({GPU: 1}, {GPU: -2}, 0),
    ],
    ids=["two-fit", "pods-limit", "floor", "missing-resource", "overcommitted-node"],
)
def test_fit_count(requests: dict[str, int], free: dict[str, int], expected: int) -> None:
    assert fit_count(requests.items(), free) == expected


@pytest.mark.parametrize(
    ("node_kwargs", "gang_kwargs", "placed"),
    [
        ({"unschedulable": True}, {}, False),
        ({"taints": (GPU_TAINT,)}, {}, False),
        (
            {"taints": (GPU_TAINT,)},
            {"tolerations": (Toleration("nvidia.com/gpu", TolerationOperator.EXISTS),)},
            True,
        ),
        ({"labels": {"gpu": "a100"}}, {"selector": {"gpu": "h100"}}, False),
        ({"labels": {"gpu": "h100"}}, {"selector": {"gpu": "h100"}}, True),
        ({"labels": {"gpu": "a100"}}, {"affinity": (IN_H100,)}, False),
    ],
    ids=["cordon", "taint", "tolerated", "selector-miss", "selector-hit", "affinity-miss"],
)
def test_filters_apply_in_placement(
    node_kwargs: dict[str, Any], gang_kwargs: dict[str, Any], placed: bool
) -> None:
    snap = ClusterState([make_node("only", **node_kwargs)])
    result = place_gang(snap, make_gang("g", 1, **gang_kwargs))
    if placed:
        assert isinstance(result, Placement)
        assert [b.node for b in result.bindings] == ["only"]
    else:
        assert isinstance(result, Unschedulable)
        assert result.code is Code.UNSCHEDULABLE_AND_UNRESOLVABLE
        assert "0/1 nodes fit one" in result.reason


# --- the IndexedFilter capability -----------------------------------------------------


class _CountingSelector(NodeSelector):
    """Overrides ``filter`` (to count the calls) without ``rejected_groups``."""

    def __init__(self) -> None:
        self.calls = 0

    def filter(self, pod: Any, node: Any) -> Any:
        self.calls += 1
        return super().filter(pod, node)


def _selector_cluster() -> ClusterState:
    nodes = [make_node(f"n{i}", labels={"pool": "a" if i < 6 else "b"}) for i in range(10)]
    return ClusterState(nodes)


def test_a_subclass_overriding_filter_alone_is_asked_node_by_node() -> None:
    # A subclass that defines filter itself but not rejected_groups is asked node by
    # node: its filter may read more of the node than the groups cover.
    state = _selector_cluster()
    pod = make_pod("p", selector={"pool": "a"})
    counting = _CountingSelector()
    elig = state.eligibility(pod, (counting,))
    assert counting.calls == len(state.nodes)
    assert list(elig.mask) == [1] * 6 + [0] * 4


def test_a_filter_declaring_rejected_groups_with_filter_is_answered_per_group() -> None:
    class Grouped(_CountingSelector):
        def filter(self, pod: Any, node: Any) -> Any:
            return super().filter(pod, node)

        def rejected_groups(self, pod: Any, index: Any) -> Any:
            return NodeSelector.rejected_groups(self, pod, index)

    state = _selector_cluster()
    grouped = Grouped()
    elig = state.eligibility(make_pod("p", selector={"pool": "a"}), (grouped,))
    assert grouped.calls == 1  # one group: the nodes outside pool=a
    assert list(elig.mask) == [1] * 6 + [0] * 4
    assert all(r == NodeSelector.ERR_REASON for r in elig.reasons[6:])
