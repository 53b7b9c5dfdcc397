"""The runtime against an in-memory API: gangs wait whole, bind whole, report why."""

from __future__ import annotations

import asyncio
import math
import time

from tests.scheduler.apifake import (
    Cluster,
    FakeApi,
    fake_runtime,
    group_obj,
    node_obj,
    pod_obj,
    settle,
)
from trainmaster.scheduler import SchedulerConfig, SchedulerRuntime


def runtime(cluster: Cluster) -> tuple[FakeApi, SchedulerRuntime]:
    return fake_runtime(cluster, SchedulerConfig(report_interval=0.0))


def test_gang_waits_until_it_fits_then_binds_whole() -> None:
    pods = [pod_obj(f"w{i}", group="g", gpus=8) for i in range(3)]
    cluster = Cluster([node_obj("n1"), node_obj("n2")], pods, [group_obj("g", 3)])
    api, rt = runtime(cluster)

    async def run() -> None:
        await rt.start()
        result = await rt.step()
        assert result is not None and not result.placed
        await rt.writer.drain(1)
        patches = [(p, b) for m, p, b in api.calls if m == "PATCH"]
        assert sorted(p for p, _ in patches) == [
            f"/api/v1/namespaces/ns/pods/w{i}/status" for i in range(3)]
        condition = patches[0][1]["status"]["conditions"][0]
        assert (condition["type"], condition["status"], condition["reason"]) == (
            "PodScheduled", "False", "Unschedulable")
        assert "does not fit" in condition["message"] or "fits in no" in condition["message"]
        events = [b for _, b in api.posts("/events")]
        assert events[0]["reason"] == "FailedScheduling"
        assert events[0]["involvedObject"]["kind"] == "PodGroup"
        assert not cluster.binds

        rt.cache.on_node("ADDED", node_obj("n3"))  # capacity grows: retried at once
        result = await rt.step()
        assert result is not None and len(result.placed) == 1
        await rt.idle()
        assert sorted(cluster.binds) == ["w0", "w1", "w2"]
        assert len(set(cluster.binds.values())) == 3
        await rt.shutdown()

    asyncio.run(run())


def test_pods_already_bound_are_never_bound_again() -> None:
    bound = pod_obj("w0", group="g", node="n1", phase="Running")
    pending = pod_obj("w1", group="g")
    cluster = Cluster([node_obj("n1"), node_obj("n2", leaf="leaf-1")], [bound, pending],
                      [group_obj("g", 2, domain="leaf", mode="required")])
    _api, rt = runtime(cluster)
    settle(rt)
    # Only the missing member is bound, next to its running peer (same leaf).
    assert cluster.binds == {"w1": "n1"}


def test_lone_pods_and_missing_pod_groups() -> None:
    cluster = Cluster([node_obj("n1")], [pod_obj("solo"), pod_obj("orphan", group="nope")], [])
    api, rt = runtime(cluster)
    settle(rt, drain=True)
    assert cluster.binds == {"solo": "n1"}
    messages = [b["status"]["conditions"][0]["message"] for m, p, b in api.calls
                if m == "PATCH" and "orphan" in p]
    assert messages and "waiting for PodGroup ns/nope" in messages[0]


def test_a_late_unschedulable_report_never_overwrites_a_bind() -> None:
    from trainmaster.scheduler.runtime.events import ApiWriter, EventRecorder

    api = FakeApi()

    async def run() -> None:
        writer = ApiWriter()
        writer.start()
        recorder = EventRecorder(api, writer, "s", "i")  # type: ignore[arg-type]
        recorder.pod_unschedulable("ns", "placed", "no room", "t", lambda: False)
        recorder.pod_unschedulable("ns", "waiting", "no room", "t", lambda: True)
        await writer.drain(1)
        await writer.stop()

    asyncio.run(run())
    assert [p for m, p, _ in api.calls if m == "PATCH"] == [
        "/api/v1/namespaces/ns/pods/waiting/status"]


def test_a_refused_bind_undoes_the_gang_and_backs_off() -> None:
    from trainmaster.kubeclient import ApiError

    pods = [pod_obj(f"w{i}", group="g", gpus=8) for i in range(2)]
    cluster = Cluster([node_obj("n1"), node_obj("n2")], pods, [group_obj("g", 2)])

    def handler(method: str, path: str, body: object) -> dict[str, object]:
        if method == "POST" and path.endswith("/w1/binding"):
            raise ApiError(403, "denied by a webhook")
        return cluster(method, path, body)

    api = FakeApi(handler)
    now = [0.0]
    rt = SchedulerRuntime(api, SchedulerConfig(), clock=lambda: now[0])  # type: ignore[arg-type]

    async def run() -> None:
        await rt.start()
        await rt.step()
        await rt.idle()
        outcome = rt.outcomes[-1]
        assert not outcome.stands and len(outcome.undone) == 1  # w0 was bound: deleted
        deletes = [p for m, p, _ in api.calls if m == "DELETE"]
        assert deletes == ["/api/v1/namespaces/ns/pods/w0"]
        binds = len(api.posts("/binding"))
        await rt.step()  # held back: no new attempt yet
        assert len(api.posts("/binding")) == binds
        assert "ns/g" not in rt.scheduler.queue
        now[0] += 1.5  # past the first backoff (1 s): back in the queue, whole again once
        rt.cache.on_pod("DELETED", pods[0])  # the undo's delete went through ...
        rt.cache.on_pod("ADDED", pod_obj("w0b", group="g", gpus=8))  # ... the Job recreated it
        await rt.step()
        await rt.idle()
        assert len(api.posts("/binding")) > binds
        await rt.shutdown()

    asyncio.run(run())


def test_elastic_gang_binds_what_fits_then_grows() -> None:
    pods = [pod_obj(f"e{i}", group="e", gpus=8) for i in range(3)]
    group = group_obj("e", 2)
    group["metadata"]["annotations"]["trainmaster.io/max-members"] = "3"
    cluster = Cluster([node_obj("n1"), node_obj("n2")], pods, [group])
    _api, rt = runtime(cluster)

    async def run() -> None:
        await rt.start()
        result = await rt.step()
        assert result is not None and len(result.placed) == 1
        await rt.idle()
        assert len(cluster.binds) == 2  # admitted at 2 of 3: more than its minimum
        # No bind echo is needed (the cache skips updates of pods it holds as bound):
        # the bind itself hands the rest back as a grow, which does not fit.
        result = await rt.step()
        assert result is not None and not result.placed
        (grow,) = rt.scheduler.queue.ordered()
        assert grow.grows and grow.placed == 2 and len(grow.members) == 1
        assert len(cluster.binds) == 2
        rt.cache.on_node("ADDED", node_obj("n3"))  # capacity grows
        await rt.step()
        await rt.idle()
        assert sorted(cluster.binds) == ["e0", "e1", "e2"]
        assert len(set(cluster.binds.values())) == 3
        await rt.shutdown()

    asyncio.run(run())


def test_cpu_per_event_shares_a_steps_cycle_cpu_among_the_events_it_answered() -> None:
    # Three pods released and a node added, answered by one step: four observations of a
    # quarter of the step's cycle CPU each, beside the one observation per cycle.
    bound = [pod_obj(f"b{i}", group="old", gpus=8, node="n1" if i < 1 else "n2")
             for i in range(3)]
    waiting = [pod_obj(f"w{i}", group="g", gpus=8) for i in range(4)]
    cluster = Cluster([node_obj("n1"), node_obj("n2")], [*bound, *waiting],
                      [group_obj("old", 3), group_obj("g", 4)])
    _, rt = runtime(cluster)
    sample = rt.metrics.registry.get_sample_value

    async def run() -> None:
        await rt.start()
        await rt.step()
        cycles = sample("trainmaster_scheduler_cycle_cpu_seconds_count") or 0.0
        events = sample("trainmaster_scheduler_event_cpu_seconds_count") or 0.0
        cycle_cpu = sample("trainmaster_scheduler_cycle_cpu_seconds_sum") or 0.0
        event_cpu = sample("trainmaster_scheduler_event_cpu_seconds_sum") or 0.0
        for pod in bound:
            rt.cache.on_pod("DELETED", pod)
        rt.cache.on_node("ADDED", node_obj("n3"))
        await rt.step()
        await rt.idle()
        assert sample("trainmaster_scheduler_cycle_cpu_seconds_count") == cycles + 1
        assert sample("trainmaster_scheduler_event_cpu_seconds_count") == events + 4
        step_cpu = (sample("trainmaster_scheduler_cycle_cpu_seconds_sum") or 0.0) - cycle_cpu
        shared = (sample("trainmaster_scheduler_event_cpu_seconds_sum") or 0.0) - event_cpu
        assert math.isclose(shared, step_cpu, rel_tol=1e-6)
        await rt.shutdown()

    asyncio.run(run())


def test_a_step_after_a_release_waits_while_releases_keep_coming_and_no_longer() -> None:
    """A deleted collection's pods go one every few ms: the step waits until none came
    for 50 ms (at most 20 such waits), so one cycle places into all of it. Without a
    release it does not wait; a stream that never stops is cut at the cap."""
    cluster = Cluster([node_obj("n1")], [], [])
    _, rt = runtime(cluster)

    async def releases(every: float, count: int) -> None:
        for _ in range(count):
            await asyncio.sleep(every)
            rt.cache.releases += 1

    async def timed(stream: asyncio.Task[None] | None) -> float:
        loop = asyncio.get_running_loop()
        started = loop.time()
        await rt._release_stream()
        took = loop.time() - started
        if stream is not None:
            stream.cancel()
        return took

    async def run() -> tuple[float, float, float, float]:
        await rt.start()
        rt.cache.capacity_changed = False
        idle = await timed(None)
        rt.cache.capacity_changed = True
        short = await timed(asyncio.create_task(releases(0.02, 6)))  # ends after ~0.12 s
        endless = await timed(asyncio.create_task(releases(0.01, 10_000)))
        # A step that a retry's timer started, its capacity flag taken by the step before,
        # while the stream is still coming (its last release 10 ms ago): it waits as well.
        rt.cache.capacity_changed = False
        rt.cache.last_release = time.monotonic() - 0.01
        mid_stream = await timed(asyncio.create_task(releases(0.02, 4)))
        await rt.shutdown()
        return idle, short, endless, mid_stream

    idle, short, endless, mid_stream = asyncio.run(run())
    assert idle < 0.01
    assert 0.12 + 0.05 <= short < 0.25 + 0.25  # past the last release and a quiet 50 ms
    assert 1.0 <= endless < 1.0 + 0.25  # 20 waits of 50 ms, then the step goes on
    assert 0.08 + 0.05 <= mid_stream < 0.25 + 0.25
