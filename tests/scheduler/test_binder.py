"""Binding a gang: retries, lost answers, and the undo when a gang cannot be completed."""

from __future__ import annotations

import asyncio
from typing import Any

from tests.scheduler.apifake import FakeApi, node_obj, pod_obj
from trainmaster.kubeclient import ApiError
from trainmaster.scheduler import SchedulerConfig
from trainmaster.scheduler.placement.place import Binding, Placement
from trainmaster.scheduler.runtime.binder import Binder, BindResult
from trainmaster.scheduler.runtime.cache import ClusterCache
from trainmaster.scheduler.runtime.metrics import SchedulerMetrics
from trainmaster.scheduler.state.views import PodState


def setup(n_pods: int, controlled: bool = True) -> tuple[ClusterCache, Placement]:
    cache = ClusterCache(SchedulerConfig())
    for i in range(n_pods):
        cache.on_node("ADDED", node_obj(f"n{i}"))
    cache.build_snapshot()
    bindings = []
    for i in range(n_pods):
        obj = pod_obj(f"p{i}", group="g", controlled=controlled)
        cache.on_pod("ADDED", obj)
        request = cache.pending[obj["metadata"]["uid"]].request
        cache.snapshot.assume(request, f"n{i}")
        bindings.append(Binding(request, f"n{i}"))
    return cache, Placement("ns/g", "leaf", "spine-0/leaf-0", tuple(bindings))


def run(api: FakeApi, cache: ClusterCache, placement: Placement, required: int,
        controlled: bool = True) -> Any:
    binder = Binder(api, cache, SchedulerMetrics(), concurrency=4, attempts=3,  # type: ignore[arg-type]
                    retry_delay=0.001)
    return asyncio.run(binder.bind_gang(placement, required, lambda uid: controlled))


def test_whole_gang_binds_and_is_confirmed() -> None:
    cache, placement = setup(3)
    api = FakeApi()
    outcome = run(api, cache, placement, 3)
    assert outcome.stands and outcome.bound == 3
    assert all(cache.snapshot.pod_state(b.pod.uid) is PodState.BOUND for b in placement.bindings)
    body = api.posts("/binding")[0][1]
    assert body["metadata"]["uid"] == placement.bindings[0].pod.uid  # never a namesake


def test_transient_errors_are_retried_and_a_lost_answer_is_a_bind() -> None:
    cache, placement = setup(2)
    seen: dict[str, int] = {}

    def handler(method: str, path: str, body: Any) -> dict[str, Any]:
        seen[path] = seen.get(path, 0) + 1
        if "p0" in path and seen[path] == 1:
            raise ApiError(503, "overloaded")
        if "p1" in path and seen[path] == 1:
            raise ApiError(0, "timeout")  # the bind went through, the answer did not
        if "p1" in path:
            raise ApiError(409, 'pod p1 is already assigned to node "n1"')
        return {}

    outcome = run(FakeApi(handler), cache, placement, 2)
    assert outcome.stands
    assert outcome.results == {b.pod.uid: BindResult.BOUND for b in placement.bindings}


def test_failed_member_undoes_the_gang_by_deleting_bound_controlled_pods() -> None:
    cache, placement = setup(4)

    def handler(method: str, path: str, body: Any) -> dict[str, Any]:
        if method == "POST" and "p2" in path:
            raise ApiError(403, "admission webhook denied the binding")
        return {}

    api = FakeApi(handler)
    outcome = run(api, cache, placement, 4)
    assert not outcome.stands and outcome.bound == 3
    deleted = sorted(p for m, p, _ in api.calls if m == "DELETE")
    assert deleted == [f"/api/v1/namespaces/ns/pods/p{i}" for i in (0, 1, 3)]
    assert all(b["preconditions"]["uid"] for m, _, b in api.calls if m == "DELETE")
    failed = placement.bindings[2].pod.uid
    assert cache.snapshot.pod_state(failed) is None  # its place is free again
    assert {placement.bindings[i].pod.uid for i in (0, 1, 3)} <= cache.terminating


def test_pods_without_a_controller_are_kept_not_deleted() -> None:
    cache, placement = setup(2, controlled=False)

    def handler(method: str, path: str, body: Any) -> dict[str, Any]:
        if method == "POST" and "p1" in path:
            raise ApiError(404, "not found")
        return {}

    api = FakeApi(handler)
    outcome = run(api, cache, placement, 2, controlled=False)
    assert outcome.kept == (placement.bindings[0].pod.uid,) and not outcome.undone
    assert not [c for c in api.calls if c[0] == "DELETE"]


def test_enough_members_bound_is_a_complete_gang() -> None:
    cache, placement = setup(3)

    def handler(method: str, path: str, body: Any) -> dict[str, Any]:
        if "p2" in path:
            raise ApiError(404, "not found")  # deleted meanwhile; minMember is 2
        return {}

    outcome = run(FakeApi(handler), cache, placement, 2)
    assert outcome.stands and outcome.bound == 2 and not outcome.undone


def test_a_clean_stop_finishes_begun_gangs_and_sends_none_of_the_others() -> None:
    """``stop_starting``: the gang with a bind in flight completes whole; the gang queued
    behind it is abandoned (no bind sent, its assumptions forgotten), so the Lease can be
    released after one gang's binds instead of a whole planned burst."""
    cache, first = setup(4)
    bindings = first.bindings
    gang_a = Placement("ns/a", "leaf", "spine-0/leaf-0", bindings[:2])
    gang_b = Placement("ns/b", "leaf", "spine-0/leaf-0", bindings[2:])
    api = FakeApi()
    binder = Binder(api, cache, SchedulerMetrics(), concurrency=1, attempts=3,  # type: ignore[arg-type]
                    retry_delay=0.001)

    async def scenario() -> tuple[Any, Any]:
        a = asyncio.ensure_future(binder.bind_gang(gang_a, 2, lambda uid: True))
        b = asyncio.ensure_future(binder.bind_gang(gang_b, 2, lambda uid: True))
        while not api.posts("/binding"):  # gang a's first bind is on the wire
            await asyncio.sleep(0)
        binder.stop_starting()
        return await a, await b

    outcome_a, outcome_b = asyncio.run(scenario())
    assert outcome_a.stands and outcome_a.bound == 2
    assert outcome_b.abandoned and not outcome_b.stands and not outcome_b.undone
    sent = sorted(path for path, _ in api.posts("/binding"))
    assert sent == sorted(f"/api/v1/namespaces/ns/pods/p{i}/binding" for i in (0, 1))
    assert [cache.snapshot.pod_state(b.pod.uid) for b in bindings] == [
        PodState.BOUND, PodState.BOUND, None, None]
