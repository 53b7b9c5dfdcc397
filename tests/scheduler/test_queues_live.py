"""Queue quotas and gang preemption against the real local control plane.

Each test brings its own kwok nodes, namespace, schedulerName and (for preemption)
PriorityClasses, runs trainmaster-scheduler as a subprocess with a config file naming
its queues, and removes everything at the end. Waits only bound correctness.
"""

from __future__ import annotations

import contextlib
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
import yaml
from kubernetes import client

from tests.conftest import LocalCluster
from tests.scheduler.live import (
    PODGROUPS,
    SchedulerProcess,
    Scratch,
    processes,
    wait_for,
)
from trainmaster.scheduler.runtime.events import now_rfc3339

pytestmark = pytest.mark.integration

QUEUE_LABEL = "kueue.x-k8s.io/queue-name"


@contextlib.contextmanager
def priority_classes(scratch: Scratch, values: dict[str, int]) -> Iterator[dict[str, str]]:
    """Cluster-scoped PriorityClasses of this test (PreemptLowerPriority), deleted after."""
    api = client.SchedulingV1Api(scratch.api_client)
    names = {key: f"tm-{scratch.tag}-{key}" for key in values}
    try:
        for key, value in values.items():
            api.create_priority_class({"metadata": {"name": names[key]}, "value": value,
                                       "preemptionPolicy": "PreemptLowerPriority"})
        yield names
    finally:
        for name in names.values():
            with contextlib.suppress(client.ApiException):
                api.delete_priority_class(name)


def _config(tmp_path: Path, queues: list[dict[str, Any]], preemption: bool = True) -> str:
    path = tmp_path / "config.yaml"
    path.write_text(yaml.safe_dump({"queues": queues, "preemption": preemption}))
    return str(path)


def _two_leaves(scratch: Scratch) -> None:
    """Four 8-GPU nodes, two per leaf (leaf-a, leaf-b), Ready."""
    for leaf in ("leaf-a", "leaf-b"):
        for i in range(2):
            scratch.add_node(f"{leaf}-{i}", leaf=leaf)
    wait_for(scratch.nodes_ready, "scratch nodes Ready")


def _gang(scratch: Scratch, name: str, size: int, *, queue: str | None = None,
          priority_class: str | None = None, domain: str = "leaf") -> set[str]:
    scratch.create_group(name, size, domain=domain)
    pods = []
    for i in range(size):
        body = scratch.pod(f"{name}-{i}", gpus=8, group=name)
        if queue:
            body["metadata"]["labels"][QUEUE_LABEL] = queue
        if priority_class:
            body["spec"]["priorityClassName"] = priority_class
        pods.append(body)
    scratch.create_pods(pods)
    return {p["metadata"]["name"] for p in pods}


def _unschedulable(scratch: Scratch, names: set[str]) -> dict[str, str]:
    out = {}
    for pod in scratch.pods():
        cond = next((c for c in pod.status.conditions or [] if c.type == "PodScheduled"), None)
        if pod.metadata.name in names and cond is not None and cond.status == "False":
            out[pod.metadata.name] = cond.message
    return out if set(out) == names else {}


def _events(scratch: Scratch, reason: str) -> list[Any]:
    return [e for e in scratch.core.list_namespaced_event(scratch.namespace).items
            if e.reason == reason]


def _metrics(proc: SchedulerProcess, expected: dict[str, float]) -> dict[str, float]:
    """The scheduler's metrics once they show ``expected``: gauges and counters follow
    the cycle that changed the pods, so one scrape right after may be a cycle behind."""
    def shown() -> dict[str, float] | None:
        metrics = proc.metrics()
        return metrics if all(metrics.get(k) == v for k, v in expected.items()) else None

    return wait_for(shown, f"the metrics {expected}")


def _events_of(scratch: Scratch, reason: str, victims: list[str]) -> list[Any]:
    """The ``reason`` Events once they name exactly ``victims`` (sorted), each once: they
    are written apart from the evictions and binds the test waited for."""
    def named() -> list[Any] | None:
        events = _events(scratch, reason)
        return events if sorted(e.involved_object.name for e in events) == victims else None

    return wait_for(named, f"{reason} Events for {victims}")


def test_queue_at_quota_holds_its_next_gang_and_releases_it_when_a_job_finishes(
    local_cluster: LocalCluster, scratch: Scratch, tmp_path: Path
) -> None:
    for i in range(4):
        scratch.add_node(f"n{i}")
    wait_for(scratch.nodes_ready, "scratch nodes Ready")
    config = _config(tmp_path, [{"name": "research", "nominalQuota": 16}])
    first = _gang(scratch, "first", 2, queue="research")
    with processes() as procs:
        procs.append(SchedulerProcess(local_cluster.kubeconfig, scratch, tmp_path, "one",
                                      "--config", config))
        wait_for(lambda: first <= set(scratch.bound()), "the first gang bound")
        second = _gang(scratch, "second", 2, queue="research")
        # No queue label: the default queue, which has no quota here.
        other = _gang(scratch, "other", 1)
        # (A first report may be about members still arriving; the quota's follows.)
        held = "queue research: 16/16 GPUs in use, gang needs 16"
        wait_for(lambda: set(_unschedulable(scratch, second).values()) == {held},
                 "second held by quota")
        wait_for(lambda: other <= set(scratch.bound()), "the default queue's gang bound")
        assert not second & set(scratch.bound())  # 8 GPUs are free, but not for research

        assert _metrics(procs[0], {
            'trainmaster_scheduler_queue_gpus_in_use{queue="research"}': 16,
            'trainmaster_scheduler_queue_nominal_quota_gpus{queue="research"}': 16,
            'trainmaster_scheduler_queue_pending_gangs{queue="research"}': 1})

        # The first job finishes: its pods are gone, the queue's usage falls.
        for name in first:
            scratch.core.delete_namespaced_pod(name, scratch.namespace, grace_period_seconds=0)
        wait_for(lambda: second <= set(scratch.bound()), "the held gang bound after release")


def test_high_priority_gang_preempts_whole_lower_priority_gangs_and_binds(
    local_cluster: LocalCluster, scratch: Scratch, tmp_path: Path
) -> None:
    _two_leaves(scratch)
    config = _config(tmp_path, [])
    with priority_classes(scratch, {"low": 10, "mid": 20, "high": 1000}) as pc, \
            processes() as procs:
        procs.append(SchedulerProcess(local_cluster.kubeconfig, scratch, tmp_path, "one",
                                      "--config", config))
        low = _gang(scratch, "low", 2, priority_class=pc["low"])
        bound = wait_for(lambda: (b := scratch.bound()) and low <= set(b) and b, "low bound")
        low_leaf = {scratch.leaf_of(bound[n]) for n in low}
        assert len(low_leaf) == 1
        mids = _gang(scratch, "mid-a", 1, priority_class=pc["mid"]) | \
            _gang(scratch, "mid-b", 1, priority_class=pc["mid"])
        wait_for(lambda: mids <= set(scratch.bound()), "mid gangs bound")
        before = {p.metadata.name: p.metadata.uid for p in scratch.pods()}
        # low checkpoints now (as the operator records it), a whole second after the mid
        # gangs started (the annotation has whole seconds): it would lose the least work
        # of the three, besides having the lowest priority (a leaf is freed for the
        # least lost work, docs/scheduler.md "Freeing a domain")
        time.sleep(2)
        scratch.custom.patch_namespaced_custom_object(
            *PODGROUPS[:2], scratch.namespace, PODGROUPS[2], "low",
            {"metadata": {"annotations": {"trainmaster.io/last-checkpoint-time":
                                          now_rfc3339()}}})

        # Three nodes in one leaf exist nowhere: no preemption can make this fit.
        hopeless = _gang(scratch, "hopeless", 3, priority_class=pc["high"])
        wait_for(lambda: _unschedulable(scratch, hopeless), "hopeless gang reported")
        time.sleep(2)  # a wrongful eviction would have been sent by now
        assert not _events(scratch, "Preempted")
        assert all(p.metadata.deletion_timestamp is None for p in scratch.pods())
        scratch.custom.delete_namespaced_custom_object(
            "scheduling.x-k8s.io", "v1alpha1", scratch.namespace, "podgroups", "hopeless")
        for name in hopeless:
            scratch.core.delete_namespaced_pod(name, scratch.namespace, grace_period_seconds=0)

        high = _gang(scratch, "high", 2, priority_class=pc["high"])
        after = wait_for(lambda: (b := scratch.bound()) and high <= set(b) and b, "high bound",
                         120)
        # The lowest-priority gang went, whole; the mid gangs stayed where they were.
        assert {scratch.leaf_of(after[n]) for n in high} == low_leaf
        remaining = {p.metadata.name: p.metadata.uid for p in scratch.pods()}
        assert not low & set(remaining)
        assert all(remaining[n] == before[n] for n in mids)
        events = _events_of(scratch, "Preempted", ["low"])
        assert all(f"{scratch.namespace}/high" in e.message for e in events)
        leaf = low_leaf.pop()
        assert all(f"to free leaf tm-{scratch.tag}-spine/{leaf}" in e.message
                   for e in events), [e.message for e in events]
        [preempting] = _events_of(scratch, "Preempting", ["high"])
        assert preempting.message.startswith(
            f"preempting 1 gangs ({scratch.namespace}/low) to free leaf "
            f"tm-{scratch.tag}-spine/{leaf}: ")
        assert _metrics(procs[0], {
            'trainmaster_scheduler_preemptions_total{queue="default"}': 1})


def test_a_borrowing_queue_runs_on_idle_gpus_and_gives_them_back_to_the_lender(
    local_cluster: LocalCluster, scratch: Scratch, tmp_path: Path
) -> None:
    _two_leaves(scratch)
    config = _config(tmp_path, [{"name": "prod", "nominalQuota": 16, "cohort": "shared"},
                                {"name": "research", "nominalQuota": 16, "cohort": "shared"}])
    with processes() as procs:
        procs.append(SchedulerProcess(local_cluster.kubeconfig, scratch, tmp_path, "one",
                                      "--config", config))
        own = _gang(scratch, "own", 2, queue="research")
        wait_for(lambda: own <= set(scratch.bound()), "research within its quota")
        lent = _gang(scratch, "lent", 2, queue="research")  # prod's 16 are idle: borrowed
        wait_for(lambda: lent <= set(scratch.bound()), "research borrowing prod's quota")
        assert _metrics(procs[0], {
            'trainmaster_scheduler_queue_borrowed_gpus{queue="research"}': 16})
        # A third research gang would borrow beyond what the cohort has idle.
        more = _gang(scratch, "more", 1, queue="research")
        limit = "queue research: 32/16 GPUs in use, gang needs 8"
        wait_for(lambda: all(limit in m for m in _unschedulable(scratch, more).values())
                 and _unschedulable(scratch, more), "research at its limit")
        before = scratch.bound()

        prod = _gang(scratch, "prod", 2, queue="prod")  # the lender wants its quota back
        after = wait_for(lambda: (b := scratch.bound()) and prod <= set(b) and b, "prod bound",
                         120)
        # The borrowed gang went, whole (the cheapest: it lost the least work), and prod
        # took its leaf; research's own gang was not touched.
        assert not lent & set(after)
        assert {after[n] for n in prod} == {before[n] for n in lent}
        assert {n: after[n] for n in own} == {n: before[n] for n in own}
        events = _events_of(scratch, "Preempted", ["lent"])
        assert "reclaiming its queue's quota" in events[0].message
        assert not more & set(after)  # research is at its quota again, no longer borrowing


def test_two_preemptors_never_pick_the_same_victims(
    local_cluster: LocalCluster, scratch: Scratch, tmp_path: Path
) -> None:
    _two_leaves(scratch)
    config = _config(tmp_path, [])
    with priority_classes(scratch, {"low": 10, "high": 1000}) as pc, processes() as procs:
        procs.append(SchedulerProcess(local_cluster.kubeconfig, scratch, tmp_path, "one",
                                      "--config", config))
        lows: set[str] = set()
        for i in range(2):
            lows |= _gang(scratch, f"low-{i}", 1, priority_class=pc["low"])
        for i in range(2, 4):  # plain pods (gangs of one) behave the same
            body = scratch.pod(f"low-{i}", gpus=8)
            body["spec"]["priorityClassName"] = pc["low"]
            scratch.create_pods([body])
            lows.add(f"low-{i}")
        wait_for(lambda: lows <= set(scratch.bound()), "four low gangs bound")
        highs = _gang(scratch, "high-a", 2, priority_class=pc["high"]) | \
            _gang(scratch, "high-b", 2, priority_class=pc["high"])
        after = wait_for(lambda: (b := scratch.bound()) and highs <= set(b) and b,
                         "both high gangs bound", 120)
        leaves = {g: {scratch.leaf_of(after[f"{g}-{i}"]) for i in range(2)}
                  for g in ("high-a", "high-b")}
        assert all(len(v) == 1 for v in leaves.values()) and leaves["high-a"] != leaves["high-b"]
        # each evicted once
        events = _events_of(scratch, "Preempted", [f"low-{i}" for i in range(4)])
        assert {e.involved_object.kind for e in events} == {"PodGroup", "Pod"}
        assert _metrics(procs[0], {
            'trainmaster_scheduler_preemptions_total{queue="default"}': 4})


HOLD = "trainmaster.io/test-hold"


def test_a_scheduler_restart_mid_preemption_keeps_the_reservation_and_evicts_nothing_twice(
    local_cluster: LocalCluster, scratch: Scratch, tmp_path: Path
) -> None:
    _two_leaves(scratch)
    config = _config(tmp_path, [])
    lows: set[str] = set()
    with priority_classes(scratch, {"low": 10, "high": 1000}) as pc, processes() as procs:
        try:
            first = SchedulerProcess(local_cluster.kubeconfig, scratch, tmp_path, "first",
                                     "--config", config)
            procs.append(first)
            for i in range(4):
                lows |= _gang(scratch, f"low-{i}", 1, priority_class=pc["low"])
            bound = wait_for(lambda: (b := scratch.bound()) and lows <= set(b) and b,
                             "four low gangs bound")
            for name in lows:  # victims stay terminating until the test lets them go
                scratch.core.patch_namespaced_pod(name, scratch.namespace,
                                                  {"metadata": {"finalizers": [HOLD]}})
            high = _gang(scratch, "high", 2, priority_class=pc["high"])

            def nominated() -> dict[str, str]:
                out = {p.metadata.name: p.status.nominated_node_name for p in scratch.pods()
                       if p.metadata.name in high and p.status.nominated_node_name}
                return out if set(out) == high else {}

            nodes = wait_for(nominated, "the preemptor's nominated nodes")
            victims = {p.metadata.name for p in scratch.pods()
                       if p.metadata.deletion_timestamp is not None}
            assert victims and {bound[v] for v in victims} == set(nodes.values())
            first.kill()

            second = SchedulerProcess(local_cluster.kubeconfig, scratch, tmp_path, "second",
                                      "--config", config)
            procs.append(second)
            # A one-pod gang as low as the victims arrives: without the reservation it
            # would backfill the first freed node while the preemptor still waits for the
            # second.
            sneaky = _gang(scratch, "sneaky", 1, priority_class=pc["low"])
            wait_for(lambda: (m := second.metrics()) and m.get(
                "trainmaster_scheduler_leader") == 1 and m, "the second scheduler leading")
            time.sleep(3)  # a second eviction would have been sent by now
            terminating = {p.metadata.name for p in scratch.pods()
                           if p.metadata.deletion_timestamp is not None}
            assert terminating == victims  # nothing evicted twice, nothing more

            first_out, *rest = sorted(victims)
            scratch.core.patch_namespaced_pod(first_out, scratch.namespace,
                                              {"metadata": {"finalizers": None}})
            wait_for(lambda: first_out not in {p.metadata.name for p in scratch.pods()},
                     "the first victim gone")
            time.sleep(3)  # the scheduler has seen the free node by now
            assert not sneaky & set(scratch.bound())  # held for the preemptor
            for name in rest:
                scratch.core.patch_namespaced_pod(name, scratch.namespace,
                                                  {"metadata": {"finalizers": None}})
            after = wait_for(lambda: (b := scratch.bound()) and high <= set(b) and b,
                             "the preemptor bound", 120)
            assert {after[n] for n in high} == set(nodes.values())
            assert not sneaky & set(after)
            metrics = second.metrics()
            assert metrics.get(
                'trainmaster_scheduler_preemptions_total{queue="default"}', 0) == 0
        finally:
            for name in lows:
                with contextlib.suppress(client.ApiException):
                    scratch.core.patch_namespaced_pod(name, scratch.namespace,
                                                      {"metadata": {"finalizers": None}})
