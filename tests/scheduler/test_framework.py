"""The registry refuses plugins that miss part of a contract, and the filter cache keys
pods by every configured filter's own ``cache_key``."""

from __future__ import annotations

import itertools
from collections.abc import Hashable, Mapping
from typing import ClassVar

import pytest

from trainmaster.scheduler import (
    DEFAULT_FILTERS,
    DEFAULT_PLUGINS,
    GPU,
    REGISTRY,
    ClusterState,
    Code,
    CycleState,
    FilterPlugin,
    Gang,
    GangScheduler,
    Handle,
    NodeInfo,
    NodeSelectorRequirement,
    PodRequest,
    Profile,
    Registry,
    Scoring,
    SelectorOperator,
    Status,
    Taint,
    TaintEffect,
    Toleration,
    TolerationOperator,
)
from trainmaster.scheduler.framework.gangs import GangManager
from trainmaster.scheduler.framework.interface import filter_key
from trainmaster.scheduler.plugins.best_fit import BestFit

from .builders import make_cluster, make_gang, make_node, make_pod

# --- a filter that reads a pod field no built-in filter reads --------------------------


class PriorityFloor:
    """Nodes labelled ``min-priority=N`` take only pods of priority >= N."""

    NAME: ClassVar[str] = "PriorityFloor"
    STATIC: ClassVar[bool] = True

    def applies(self, pod: PodRequest) -> bool:
        return True

    def cache_key(self, pod: PodRequest) -> Hashable:
        return pod.priority

    def filter(self, pod: PodRequest, node: NodeInfo) -> Status:
        floor = int(node.labels.get("min-priority", "0"))
        if pod.priority >= floor:
            return Status.success(self.NAME)
        return Status.of(Code.UNSCHEDULABLE_AND_UNRESOLVABLE, self.NAME, "priority too low")


def _without(member: str) -> type:
    """``PriorityFloor`` minus one contract member."""
    namespace = {k: v for k, v in vars(PriorityFloor).items() if k != member}
    namespace["NAME"] = f"No-{member}"
    return type(f"PriorityFloorWithout{member}", (), namespace)


@pytest.mark.parametrize("member", ["cache_key", "applies", "STATIC"])
def test_filter_missing_a_contract_member_cannot_be_registered(member: str) -> None:
    registry = Registry()
    with pytest.raises(ValueError, match=member):
        registry.register(_without(member))
    assert len(registry) == 0


def test_filter_without_cache_key_is_refused_by_profile_build() -> None:
    """A hand-made registry (a plain dict) skips ``register``; ``Profile.build`` checks
    the instance, rather than silently leaving the filter out of the profile."""
    no_key = _without("cache_key")
    registry = {**REGISTRY, no_key.NAME: lambda h: no_key()}  # type: ignore[attr-defined]
    snap = make_cluster()
    with pytest.raises(ValueError, match="cache_key"):
        Profile.build(
            Handle(snap, GangManager(snap.placed_members)),
            (*DEFAULT_PLUGINS, no_key.NAME),  # type: ignore[attr-defined]
            registry,
        )


def test_register_refuses_duplicates_and_half_reserve_plugins() -> None:
    registry = Registry()
    registry.register(PriorityFloor)
    with pytest.raises(ValueError, match="already registered"):
        registry.register(PriorityFloor)

    class HalfReserve:
        NAME: ClassVar[str] = "HalfReserve"

        def reserve(self, pod: PodRequest, node: str) -> Status:
            return Status.success(self.NAME)

    with pytest.raises(ValueError, match="unreserve"):
        registry.register(HalfReserve)
    assert list(registry) == ["PriorityFloor"]


def test_default_plugins_are_registered_once_in_order() -> None:
    # Every registered plugin: the default profile scores with BestFit and DatasetLocality.
    assert tuple(REGISTRY) == DEFAULT_PLUGINS
    assert [f.NAME for f in DEFAULT_FILTERS] == [
        "NodeUnschedulable",
        "NodeSelector",
        "NodeAffinity",
        "TaintToleration",
    ]
    assert all(isinstance(f, FilterPlugin) for f in DEFAULT_FILTERS)


def test_new_filter_key_keeps_cache_answers_apart() -> None:
    """Two pods equal in everything the built-in filters read, different in priority:
    the cache must not hand the second pod the first pod's answer, in either order."""
    registry = {**REGISTRY, PriorityFloor.NAME: lambda h: PriorityFloor()}
    nodes = [make_node("gated", labels={"min-priority": "10"}), make_node("open")]
    for first, second in [(0, 10), (10, 0)]:
        snap = ClusterState(nodes)
        sched = GangScheduler(snap, plugins=(*DEFAULT_PLUGINS, PriorityFloor.NAME),
                              registry=registry)  # fmt: skip
        masks: dict[int, bytes] = {}
        for priority in (first, second):
            pod = make_pod(f"p{priority}", gpus=8, priority=priority)
            masks[priority] = snap.eligibility(pod, sched.profile.filters).mask
        assert masks[0] == bytes([0, 1]), masks
        assert masks[10] == bytes([1, 1]), masks


# --- the built-in filters' keys and applies() -----------------------------------------

SELECTORS: tuple[dict[str, str], ...] = ({}, {"pool": "a"}, {"pool": "b"})
AFFINITIES = (
    (),
    (NodeSelectorRequirement("pool", SelectorOperator.IN, ("a",)),),
    (NodeSelectorRequirement("pool", SelectorOperator.DOES_NOT_EXIST),),
)
TOLERATIONS = (
    (),
    (Toleration("gpu", TolerationOperator.EXISTS),),
    (Toleration("gpu", TolerationOperator.EQUAL, "x"),),
)
PODS = [
    make_pod(f"p{i}", selector=s, affinity=a, tolerations=t)
    for i, (s, a, t) in enumerate(itertools.product(SELECTORS, AFFINITIES, TOLERATIONS))
]
NODES = [
    make_node("plain"),
    make_node("pool-a", labels={"pool": "a"}),
    make_node("pool-b", labels={"pool": "b"}),
    make_node("tainted-a", labels={"pool": "a"}, taints=[Taint("gpu", "x")]),
    make_node("tainted-y", taints=[Taint("gpu", "y", TaintEffect.NO_EXECUTE)]),
    make_node("cordoned", unschedulable=True),
]


def _direct(pod: PodRequest, node: NodeInfo) -> int:
    if node.unschedulable:
        return 0
    return int(all(f.filter(pod, node).is_success() for f in DEFAULT_FILTERS))


@pytest.mark.parametrize("f", DEFAULT_FILTERS, ids=lambda f: f.NAME)
def test_equal_keys_mean_equal_answers(f: FilterPlugin) -> None:
    """The key covers what the filter reads: pods with equal keys agree on every node."""
    by_key: dict[Hashable, list[PodRequest]] = {}
    for pod in PODS:
        by_key.setdefault(f.cache_key(pod), []).append(pod)
    for pods in by_key.values():
        for node in NODES:
            assert len({f.filter(p, node).is_success() for p in pods}) == 1


@pytest.mark.parametrize("f", DEFAULT_FILTERS, ids=lambda f: f.NAME)
def test_not_applying_means_passing(f: FilterPlugin) -> None:
    for pod in PODS:
        if not f.applies(pod):
            assert all(f.filter(pod, node).is_success() for node in NODES), pod


def test_cache_distinguishes_pods_differing_in_any_filter_key() -> None:
    """All 27 selector x affinity x tolerations combinations through one snapshot (one
    cache): every cached answer equals evaluating the filters directly."""
    snap = ClusterState(NODES)
    assert len({filter_key(p, DEFAULT_FILTERS) for p in PODS}) == len(PODS)
    for pod in [*PODS, *reversed(PODS)]:
        expected = bytes(_direct(pod, n) for n in snap.nodes)
        assert snap.eligibility(pod, DEFAULT_FILTERS).mask == expected, pod.name


def test_pod_key_is_per_filter_sequence() -> None:
    """The snapshot remembers a pod's key per filter sequence, never across them."""
    snap = ClusterState(NODES)
    pod = make_pod("p", priority=7)
    with_floor = (*DEFAULT_FILTERS, PriorityFloor())
    assert snap.pod_key(pod, DEFAULT_FILTERS) == filter_key(pod, DEFAULT_FILTERS)
    assert snap.pod_key(pod, with_floor) == filter_key(pod, with_floor)
    assert snap.pod_key(pod, with_floor)[-1] == 7  # type: ignore[index]
    assert snap.pod_key(pod, DEFAULT_FILTERS) == filter_key(pod, DEFAULT_FILTERS)


class FastTier:
    """The walk-through plugin of docs/architecture.md."""

    NAME: ClassVar[str] = "FastTier"

    def pre_score(self, state: CycleState, gang: Gang) -> Status:
        return Status.success(self.NAME) if gang.priority >= 10 else Status(
            Code.SKIP, (), self.NAME)

    def score(self, state: CycleState, gang: Gang, node: NodeInfo,
              requests: Mapping[str, int], free: Mapping[str, int]) -> int:
        return 1 if node.labels.get("tier") == "fast" else 0


@pytest.mark.parametrize(
    ("priority", "weight", "expected"),
    [
        (10, 5, "b-fast"),  # 5 x 1 beats best fit's 4-GPU difference
        (10, 3, "a-half"),  # 3 x 1 does not
        (0, 5, "a-half"),  # skipped: best fit alone
    ],
    ids=["weighted-wins", "best-fit-wins", "skipped"],
)
def test_a_weighted_score_plugin_joins_best_fit(priority: int, weight: int,
                                                expected: str) -> None:
    registry = Registry()
    registry.register(BestFit)
    registry.register(FastTier)
    nodes = [make_node("a-half", topology=("s", "l")),
             make_node("b-fast", topology=("s", "l"), labels={"tier": "fast"})]
    snap = ClusterState(nodes, ("spine", "leaf"))
    snap.assume(PodRequest("x", requests={GPU: 4}), "a-half")  # 4 of 8 GPUs left
    sched = GangScheduler(snap, plugins=("BestFit", "FastTier"), registry=registry,
                          weights={"FastTier": weight})
    assert [(p.NAME, w) for p, w in sched.profile.scorer.scorers] == [
        ("BestFit", 1), ("FastTier", weight)]
    sched.submit(make_gang("g", 1, gpus=4, priority=priority))
    (placement,) = sched.run_cycle().placed
    assert placement.bindings[0].node == expected


def test_weights_must_be_positive() -> None:
    with pytest.raises(ValueError, match="weight must be > 0"):
        Scoring(((BestFit(), 0),))
