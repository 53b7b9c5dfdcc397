"""Informer events -> snapshot and pending pods: what is charged, what is pending, what
wakes the loop."""

from __future__ import annotations

from tests.scheduler.apifake import group_obj, node_obj, pod_obj
from trainmaster.scheduler import GPU, SchedulerConfig
from trainmaster.scheduler.runtime.cache import ClusterCache
from trainmaster.scheduler.state.views import PodState


def cache_with_nodes(*names: str) -> ClusterCache:
    cache = ClusterCache(SchedulerConfig())
    for name in names:
        cache.on_node("ADDED", node_obj(name))
    cache.build_snapshot()
    cache.take_dirty()
    cache.take_capacity_changed()
    return cache


def test_bound_pods_of_any_scheduler_are_charged_and_released() -> None:
    cache = cache_with_nodes("n1")
    pod = pod_obj("other", scheduler="default-scheduler", node="n1", phase="Running")
    cache.on_pod("ADDED", pod)
    assert cache.snapshot.free("n1")[GPU] == 4
    assert not cache.pending
    pod["status"]["phase"] = "Succeeded"
    cache.on_pod("MODIFIED", pod)
    assert cache.snapshot.free("n1")[GPU] == 8
    assert cache.take_capacity_changed()


def test_only_our_unbound_pods_are_pending_grouped_by_gang() -> None:
    cache = cache_with_nodes("n1")
    cache.on_pod("ADDED", pod_obj("a", group="g"))
    cache.on_pod("ADDED", pod_obj("b", group="g"))
    cache.on_pod("ADDED", pod_obj("c", scheduler="default-scheduler"))
    cache.on_pod("ADDED", pod_obj("d", deleting=True))
    assert {i.request.name for i in cache.pending.values()} == {"a", "b"}
    assert cache.take_dirty() == {"ns/g"}
    assert len(cache.pending_members("ns/g")) == 2


def test_updates_that_change_nothing_do_not_wake_the_loop() -> None:
    cache = cache_with_nodes("n1")
    pod = pod_obj("a", group="g")
    cache.on_pod("ADDED", pod)
    cache.take_dirty()
    cache.changed.clear()
    pod["status"]["conditions"] = [{"type": "PodScheduled", "status": "False"}]
    cache.on_pod("MODIFIED", pod)  # e.g. our own condition patch
    assert not cache.dirty and not cache.changed.is_set()
    cache.on_node("MODIFIED", node_obj("n1", rv="2"))  # a heartbeat
    assert not cache.take_capacity_changed()


def test_binding_echo_moves_a_pod_from_pending_to_bound() -> None:
    cache = cache_with_nodes("n1")
    pod = pod_obj("a")
    cache.on_pod("ADDED", pod)
    info = cache.pending[pod["metadata"]["uid"]]
    cache.snapshot.assume(info.request, "n1")
    assert cache.pending_members("ns/pod:a") == []  # in flight: never placed twice
    pod["spec"]["nodeName"] = "n1"
    cache.on_pod("MODIFIED", pod)
    assert not cache.pending
    assert cache.snapshot.pod_state(info.request.uid) is PodState.BOUND


def test_pods_on_unknown_nodes_wait_for_the_node() -> None:
    cache = cache_with_nodes("n1")
    cache.on_pod("ADDED", pod_obj("a", node="n2", phase="Running"))
    cache.on_node("ADDED", node_obj("n2"))
    assert cache.apply_node_updates() == 1
    assert cache.snapshot.free("n2")[GPU] == 4


def test_node_changes_are_applied_in_one_rebuild() -> None:
    cache = cache_with_nodes("n1", "n2", "n3")
    cache.on_pod("ADDED", pod_obj("a", node="n1", phase="Running"))
    cache.on_node("MODIFIED", node_obj("n1", unschedulable=True))
    cache.on_node("MODIFIED", node_obj("n2", gpus=4))
    cache.on_node("ADDED", node_obj("n4"))
    assert cache.take_capacity_changed()
    assert not cache.snapshot.node("n1").unschedulable  # not yet: batched
    assert cache.apply_node_updates() == 3
    snap = cache.snapshot
    assert snap.node("n1").unschedulable and snap.free("n1")[GPU] == 4  # pods stay
    assert snap.free("n2")[GPU] == 4 and snap.free("n4")[GPU] == 8


def test_a_deleted_node_is_never_chosen_again_until_it_comes_back() -> None:
    cache = cache_with_nodes("n1", "n2")
    cache.on_pod("ADDED", pod_obj("a", node="n1", phase="Running"))
    cache.on_node("DELETED", node_obj("n1"))  # the watch's last state: schedulable, full
    cache.on_node("DELETED", node_obj("gone"))  # never seen: nothing to do
    assert cache.take_capacity_changed()
    assert cache.apply_node_updates() == 1
    snap = cache.snapshot
    assert snap.node("n1").unschedulable and snap.free("n1").get(GPU, 0) <= 0
    assert not snap.node("n2").unschedulable and "gone" not in cache.nodes
    cache.on_node("ADDED", node_obj("n1"))  # re-registered under the same name
    cache.apply_node_updates()
    assert not cache.snapshot.node("n1").unschedulable
    assert cache.snapshot.free("n1")[GPU] == 4  # its pod is still charged


def test_terminating_members_do_not_count_as_placed() -> None:
    cache = cache_with_nodes("n1")
    pod = pod_obj("a", group="g", node="n1", phase="Running")
    cache.on_pod("ADDED", pod)
    assert len(cache.placed_nodes("ns/g")) == 1
    pod["metadata"]["deletionTimestamp"] = "2026-01-01T00:00:00Z"
    cache.on_pod("MODIFIED", pod)
    assert cache.placed_nodes("ns/g") == []
    assert cache.snapshot.free("n1")[GPU] == 4  # still running: still charged


def test_pod_groups_mark_their_gang() -> None:
    cache = cache_with_nodes("n1")
    cache.on_group("ADDED", group_obj("g", 3, domain="leaf", mode="required"))
    assert cache.take_dirty() == {"ns/g"}
    assert cache.groups["ns/g"].min_member == 3
    cache.on_group("DELETED", group_obj("g", 3))
    assert "ns/g" not in cache.groups


def _line(kind: str, obj: dict[str, object]) -> bytes:
    import json

    return json.dumps({"type": kind, "object": {"kind": "Pod", "apiVersion": "v1", **obj}},
                      separators=(",", ":")).encode()


def test_status_updates_of_bound_pods_are_skipped_undecoded() -> None:
    cache = cache_with_nodes("n1")
    pod = pod_obj("a", node="n1", phase="Running", rv="7",
                  extra_spec={"nodeSelector": {"uid": "not-this-one"}})
    cache.on_pod("ADDED", pod)
    assert cache.skip_pod_event(_line("MODIFIED", pod)) == "7"
    finished = {**pod, "status": {"phase": "Succeeded"}}
    assert cache.skip_pod_event(_line("MODIFIED", finished)) is None
    deleting = {**pod, "metadata": {**pod["metadata"], "deletionTimestamp": "2026-01-01T00:00:00Z"}}
    assert cache.skip_pod_event(_line("MODIFIED", deleting)) is None
    assert cache.skip_pod_event(_line("DELETED", pod)) is None
    unknown = pod_obj("b", node="n1", phase="Running")  # not in the snapshot yet
    assert cache.skip_pod_event(_line("MODIFIED", unknown)) is None
