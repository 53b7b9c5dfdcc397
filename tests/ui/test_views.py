"""The UI's view models, on small worlds whose answers are known."""

from __future__ import annotations

import http.client
from datetime import timedelta
from typing import Any

from tests.ui.world import T0, at, node, pod, podgroup
from trainmaster.api import HIGHER_PRIORITY, PreemptionRecord, preemption_annotations
from trainmaster.bench import build_world, served
from trainmaster.ui import (
    FixedSource,
    Sample,
    World,
    build_topology,
    create_app,
    job_info,
    pending_gangs,
    queue_infos,
    step_rate,
    why_pending,
)


def test_topology_marks_each_unusable_node_with_its_cause_and_each_gang_on_its_node() -> None:
    fenced = node("n2", "leaf-1", unschedulable=True, taints=[
        {"key": "trainmaster.io/unhealthy", "value": "GPUHealthy", "effect": "NoSchedule"}])
    fenced["metadata"]["annotations"] = {
        "trainmaster.io/fenced": '{"reason": "GPUHealthy=False: XID 79"}'}
    down = node("n3", "leaf-1")
    down["status"]["conditions"] = [{"type": "Ready", "status": "Unknown",
                                     "reason": "NodeStatusUnknown"}]
    world = World(nodes=[node("n0", "leaf-0"), node("n1", "leaf-0", unschedulable=True),
                         fenced, down],
                  pods=[pod("a-0", "a-r0", "n0", gpus=6)])
    topo = build_topology(world)
    cells = {c.name: c for leaf in topo.cells.values() for c in leaf}
    assert (cells["n0"].used, cells["n0"].free, cells["n0"].gangs) == (6, 2, ["ml/a-r0"])
    assert (cells["n1"].state, cells["n1"].free) == ("cordoned", 0)
    assert (cells["n2"].state, cells["n2"].cause) == ("fenced", "GPUHealthy=False: XID 79")
    assert cells["n3"].state == "NotReady" and "NodeStatusUnknown" in cells["n3"].cause
    leaves = {r.name: r for r in topo.leaves["spine-0"]}
    assert (leaves["leaf-0"].used, leaves["leaf-0"].free, leaves["leaf-0"].cordoned) == (6, 2, 1)
    assert (leaves["leaf-1"].fenced, leaves["leaf-1"].not_ready, leaves["leaf-1"].free) == (1, 1, 0)
    assert (topo.total.gpus, topo.total.used) == (32, 6)


def test_step_rate_is_between_the_last_two_rising_checkpoints() -> None:
    samples = [Sample(T0, 100), Sample(T0 + timedelta(seconds=50), 200),
               Sample(T0 + timedelta(seconds=150), 400)]
    assert step_rate(samples) == 2.0
    assert step_rate(samples[:1]) is None


def test_a_recovery_shows_detected_bound_first_step_and_what_it_lost() -> None:
    tj = {"metadata": {"name": "gpt", "namespace": "ml", "creationTimestamp": at(0)},
          "spec": {"nodes": 2, "gpusPerPod": 8, "queue": "research", "priority": 5},
          "status": {"phase": "Running", "attempt": 1, "restarts": 1, "gang": "gpt-r1",
                     "runningSince": at(700),
                     "lastCheckpoint": {"path": "/c/gpt/step-900", "step": 900,
                                        "time": at(900)},
                     "restartHistory": [{"cause": "PodFailed", "message": "exit code 137",
                                         "attempt": 0, "newAttempt": 1, "time": at(600),
                                         "resumeFrom": "/c/gpt/step-400"}]}}
    events = [{"reason": "Scheduled", "lastTimestamp": at(10), "metadata": {"uid": "e0"},
               "involvedObject": {"kind": "PodGroup", "namespace": "ml", "name": "gpt-r0"}},
              {"reason": "Scheduled", "lastTimestamp": at(660), "metadata": {"uid": "e1"},
               "involvedObject": {"kind": "PodGroup", "namespace": "ml", "name": "gpt-r1"}}]
    samples = [Sample(T0 + timedelta(seconds=s), step)
               for s, step in ((300, 200), (500, 400), (800, 700))]
    world = World(trainingjobs=[tj], events=events, samples={("ml", "gpt"): samples},
                  now=T0 + timedelta(seconds=1000))
    info = job_info(tj, world)
    (r,) = info.recoveries
    assert (r.detected, r.bound, r.first_step) == (
        T0 + timedelta(seconds=600), T0 + timedelta(seconds=660), T0 + timedelta(seconds=800))
    # From the checkpoint resumed from (t=500) to the first step after the new gang (800).
    assert r.lost_seconds == 300.0
    # 100 s of work at 1 step/s between that checkpoint and the fault.
    assert (r.resume_step, r.lost_steps) == (400, 100)
    assert (info.step, info.queue, info.priority, info.restarts) == (900, "research", 5, 1)
    # 1000 s old, 10 s before the first gang was bound, 300 s lost in the recovery.
    assert info.effective == 690.0
    assert info.checkpoint_age == 100.0


def _leaf_world() -> World:
    """Two leaves of two 8-GPU nodes; a 1-node job on each leaf; a 2-node gang that must
    stay in one leaf waits."""
    return World(
        nodes=[node("n0", "leaf-0"), node("n1", "leaf-0"), node("n2", "leaf-1"),
               node("n3", "leaf-1")],
        pods=[pod("a-0", "a-r0", "n0"), pod("b-0", "b-r0", "n3"),
              pod("w-0", "wait", None), pod("w-1", "wait", None)],
        podgroups=[podgroup("wait", 2)])


def test_why_pending_names_the_one_job_whose_end_lets_the_gang_fit() -> None:
    (why,) = why_pending(_leaf_world())
    assert why.pending.key == "ml/wait" and why.pending.gpus == 16
    assert "fits in no single leaf" in why.now
    assert why.counterfactual == "fits on leaf leaf-0 once job ml/a-r0 finishes"


def test_why_pending_finds_the_jobs_to_move_when_no_single_one_is_enough() -> None:
    world = _leaf_world()
    # Each leaf's two nodes now hold a small job each: no single end frees a leaf.
    world.pods[:2] = [pod("a-0", "a-r0", "n0"), pod("c-0", "c-r0", "n1"),
                      pod("b-0", "b-r0", "n3"), pod("d-0", "d-r0", "n2")]
    (why,) = why_pending(world)
    assert why.counterfactual.startswith("fits on leaf leaf-")
    assert "after moving 2 job(s)" in why.counterfactual and "16 GPUs" in why.counterfactual


def _cpu_pod(name: str, group: str, node_name: str | None, queue: str,
             cpu: str) -> dict[str, Any]:
    body = pod(name, group, node_name, queue=queue)
    body["spec"]["containers"][0]["resources"]["requests"]["cpu"] = cpu
    return body


def test_why_pending_is_the_schedulers_admission_answer_on_its_published_ledger() -> None:
    # research lends 8 GPUs to prod (prod borrows them); research's waiting gang fits its
    # GPU quota, but its cpu quota (8 cores, 6 in use) decides: the answer is the
    # scheduler's QueueLedger.refusal on the ledger it published, not a count by label.
    config = {"queues": [
        {"name": "research", "nominalQuota": 16, "cohort": "all",
         "resources": [{"name": "cpu", "nominalQuota": "8"}]},
        {"name": "prod", "nominalQuota": 8, "cohort": "all"}]}
    published = [
        {"name": "research", "cohort": "all", "nominalQuota": 16, "flavorsUsage": [
            {"name": "default", "resources": [
                {"name": "nvidia.com/gpu", "total": 8, "borrowed": 0},
                {"name": "cpu", "total": 6000, "borrowed": 0}]}]},
        {"name": "prod", "cohort": "all", "nominalQuota": 8, "flavorsUsage": [
            {"name": "default", "resources": [
                {"name": "nvidia.com/gpu", "total": 16, "borrowed": 8}]}]}]
    waiting = _cpu_pod("w-0", "wait", None, "research", "4")
    waiting["status"]["conditions"] = [{
        "type": "PodScheduled", "status": "False", "reason": "Unschedulable",
        "message": "queue research: 6 cpu of 8 cpu in use, gang needs 4 cpu; cohort all "
                   "has only 2 cpu idle", "lastTransitionTime": at(1)}]
    world = World(
        nodes=[node(f"n{i}", f"leaf-{i // 2}") for i in range(6)],
        pods=[_cpu_pod("r-0", "r-r0", "n0", "research", "6"),
              pod("p-0", "p-r0", "n1", queue="prod"), pod("p-1", "p-r0", "n2", queue="prod"),
              waiting],
        podgroups=[podgroup("wait", 1)], configs=[config], ledger=published,
        queues=config["queues"])
    (why,) = why_pending(world)
    assert why.pending.reason == ("Unschedulable: queue research: 6 cpu of 8 cpu in use, "
                                  "gang needs 4 cpu; cohort all has only 2 cpu idle")
    assert why.quota == ("queue research: 6 cpu of 8 cpu in use, gang needs 4 cpu; cohort "
                         "all has only 2 cpu idle")
    assert why.now.startswith("fits now on")
    assert why.counterfactual == ("placement fits; quota admits it once its own queue's "
                                  "running gangs finish")
    queues = {q.name: q for q in queue_infos(world)}
    assert (queues["prod"].in_use, queues["prod"].borrowed) == (16, 8)
    assert (queues["research"].lent, [p.key for p in queues["research"].pending]) == (
        8, ["ml/wait"])


def test_an_elastic_gang_shows_its_range_and_the_members_it_runs() -> None:
    group = podgroup("el", 1)
    group["metadata"]["annotations"]["trainmaster.io/max-members"] = "4"
    world = World(
        nodes=[node(f"n{i}", f"leaf-{i // 2}") for i in range(4)],
        pods=[pod("el-0", "el", "n0"), pod("el-1", "el", "n1"),
              pod("el-2", "el", None), pod("el-3", "el", None)],
        podgroups=[group])
    (why,) = why_pending(world)
    assert why.pending.size == "1..4 (running 2)"
    # The scheduler's assemble: a grow of the running gang, its members held to its leaf
    # (leaf-0 is full), so it does not fit now.
    assert why.now != "no pods to place yet" and not why.now.startswith("fits now")


def test_pending_gangs_are_in_the_schedulers_order() -> None:
    low = {"metadata": {"name": "old", "namespace": "ml", "creationTimestamp": at(0)},
           "spec": {"nodes": 1, "priority": 1}, "status": {"phase": "Pending"}}
    high = {"metadata": {"name": "new", "namespace": "ml", "creationTimestamp": at(60)},
            "spec": {"nodes": 1, "priority": 9}, "status": {"phase": "Pending"}}
    young = {"metadata": {"name": "young", "namespace": "ml", "creationTimestamp": at(90)},
             "spec": {"nodes": 1, "priority": 1}, "status": {"phase": "Pending"}}
    world = World(trainingjobs=[young, low, high])
    assert [p.name for p in pending_gangs(world)] == ["new", "old", "young"]


def test_preemptions_come_from_the_schedulers_events() -> None:
    evict = PreemptionRecord("ml/urgent-r0", 100, "prod", HIGHER_PRIORITY, 16, 3200.0)
    shrink = PreemptionRecord("ml/urgent-r0", 100, "prod", HIGHER_PRIORITY, 8, 60.0,
                              shrink=True, members=1)
    world = World(
        podgroups=[{"metadata": {"name": name, "namespace": "ml",
                                 "labels": {"kueue.x-k8s.io/queue-name": "research"}}}
                   for name in ("v-r0", "el-r0")],
        queues=[{"name": "research", "nominalQuota": 8}, {"name": "prod", "nominalQuota": 8}],
        events=[{"reason": "Preempted", "lastTimestamp": at(5),
                 "metadata": {"uid": f"e{i}", "annotations": preemption_annotations(record)},
                 "involvedObject": {"kind": "PodGroup", "namespace": "ml", "name": victim},
                 "message": "whatever the scheduler words it as"}
                for i, (victim, record) in enumerate((("v-r0", evict), ("el-r0", shrink)))])
    queues = {q.name: q for q in queue_infos(world)}
    for name in ("prod", "research"):
        got = {(p.victim, p.preemptor, p.gpus, p.work_lost, p.victim_queue, p.shrink)
               for p in queues[name].preemptions}
        assert got == {("ml/v-r0", "ml/urgent-r0", 16, 3200, "research", False),
                       ("ml/el-r0", "ml/urgent-r0", 8, 60, "research", True)}


def test_every_view_answers_over_http_with_real_tables() -> None:
    world = build_world(nodes=200, jobs=30)
    job = world.trainingjobs[1]["metadata"]
    with served(create_app(FixedSource(world))) as port:
        for path in ("/topology", "/topology/leaf-3", "/jobs",
                     f"/jobs/{job['namespace']}/{job['name']}", "/queues", "/pending"):
            conn = http.client.HTTPConnection("127.0.0.1", port, timeout=30)
            conn.request("GET", path)
            resp = conn.getresponse()
            body = resp.read().decode()
            assert resp.status == 200, path
            assert "<table" in body and "<caption>" in body and '<th scope="col">' in body
            assert "/static/htmx.min.js" in body and 'sse-connect="/events"' in body
            conn.request("GET", path + "?fragment=1")
            fragment = conn.getresponse().read().decode()
            assert "<html" not in fragment and "<table" in fragment
        conn = http.client.HTTPConnection("127.0.0.1", port, timeout=30)
        conn.request("GET", "/jobs/nowhere/none")
        missing = conn.getresponse()
        assert missing.status == 404 and b"no TrainingJob" in missing.read()
        conn.request("POST", "/jobs")
        assert conn.getresponse().status == 405  # read-only: GET routes only


def test_the_queues_page_shows_the_fair_sharing_status_shows() -> None:
    """/queues has the cohort tree with each queue's DRF share against its entitlement:
    the same report, from the same function, as `trainmaster status` on the same
    objects (the scheduler's config and its published ledger)."""
    import re

    from trainmaster.status import summarize

    config = {"fairSharing": {"enable": True},
              "cohorts": [{"name": "all", "resources": [
                  {"name": "nvidia.com/gpu", "nominalQuota": 8}]}],
              "queues": [{"name": "a", "cohort": "all", "nominalQuota": 8,
                          "fairSharing": {"weight": 1}},
                         {"name": "b", "cohort": "all", "nominalQuota": 8,
                          "fairSharing": {"weight": 3}}]}
    ledger = [{"name": "a", "flavorsUsage": [{"name": "default", "resources": [
                  {"name": "nvidia.com/gpu", "total": 20, "borrowed": 12}]}]},
              {"name": "b", "flavorsUsage": [{"name": "default", "resources": [
                  {"name": "nvidia.com/gpu", "total": 2, "borrowed": 0}]}]}]
    world = World(queues=config["queues"], configs=[config], ledger=ledger)
    status = summarize([], [], [], T0, config["queues"], ledger=ledger, configs=[config])
    assert status.fairness is not None
    with served(create_app(FixedSource(world))) as port:
        conn = http.client.HTTPConnection("127.0.0.1", port, timeout=30)
        conn.request("GET", "/queues")
        body = conn.getresponse().read().decode()
    assert 'id="fairness"' in body and "fair sharing on" in body
    for entry in status.fairness["nodes"]:
        row = re.search(rf'<tr id="fair-{entry["kind"]}-{entry["name"]}"[^>]*>(.*?)</tr>', body)
        assert row is not None, entry["name"]
        cells = dict(re.findall(r'<td class="(\w+)">(.*?)</td>', row.group(1)))
        share = "inf" if entry["share_infinite"] else f"{entry['share']:.3f}"
        assert cells["share"] == share
        entitlement = "-" if entry["entitlement"] is None else f"{100 * entry['entitlement']:.0f}%"
        assert cells["entitlement"] == entitlement
    a = re.search(r'<tr id="fair-queue-a"[^>]*>(.*?)</tr>', body)
    assert a is not None
    # 12 borrowed over the cohort's 24 lendable, weight 1; entitled to a quarter.
    assert '<td class="share">0.500</td>' in a.group(1)
    assert '<td class="entitlement">25%</td>' in a.group(1)
    assert "nvidia.com/gpu 20/8 borrowed 12" in a.group(1)
    b = re.search(r'<tr id="fair-queue-b"[^>]*>(.*?)</tr>', body)
    # a's 12 borrowed come from the cohort's own 8 and b's 6 idle, pro rata: 12*6//14.
    assert b is not None and "lent 5" in b.group(1) and ">75%<" in b.group(1)


def test_the_why_pending_state_follows_a_newer_world_by_its_changes_only() -> None:
    """advance() converts only the objects that changed and ends where a state built from
    scratch on the newer world is: the same answers, the same free GPUs."""
    from trainmaster.ui._why import Counterfactuals

    world = _leaf_world()
    cf = Counterfactuals(world)
    assert cf.advance(world) == 0  # same objects: nothing converted
    (before,) = [cf.explain(p) for p in pending_gangs(world)]
    assert before.counterfactual == "fits on leaf leaf-0 once job ml/a-r0 finishes"
    # a-r0 ends, b-r0 moves to n2 (a new pod object), n1 is cordoned, n4 joins leaf-2.
    newer = World(
        nodes=[world.nodes[0], node("n1", "leaf-0", unschedulable=True), world.nodes[2],
               world.nodes[3], node("n4", "leaf-2")],
        pods=[pod("b-0", "b-r0", "n2"), *world.pods[2:]], podgroups=world.podgroups)
    assert cf.advance(newer) == 5  # a-0 gone, b-0 dropped and added, n1 and n4
    fresh = Counterfactuals(newer)
    for name in ("n0", "n1", "n2", "n3", "n4"):
        assert cf.state.free(name) == fresh.state.free(name), name
        assert cf.state.node(name) == fresh.state.node(name), name
    assert dict(cf.running) == dict(fresh.running)
    gangs = pending_gangs(newer)
    assert [cf.explain(p) for p in gangs] == [fresh.explain(p) for p in gangs]
    # leaf-0 has one usable node left (n1 cordoned); b-r0 now blocks leaf-1.
    assert cf.explain(gangs[0]).counterfactual == "fits on leaf leaf-1 once job ml/b-r0 finishes"


def test_a_resumed_checkpoint_reported_again_is_not_the_first_step() -> None:
    """The new gang reports the checkpoint it resumed from once more (a later time, the
    same step): the time lost still runs from that checkpoint's first report to the first
    checkpoint past it (on real nodes: dp-example resumed at step 40, reported 40 again,
    then 60)."""
    tj = {"metadata": {"name": "dp", "namespace": "ml", "creationTimestamp": at(0)},
          "spec": {"nodes": 2, "gpusPerPod": 8},
          "status": {"phase": "Running", "attempt": 1, "restarts": 1, "gang": "dp-r1",
                     "runningSince": at(58),
                     "lastCheckpoint": {"path": "/c/dp/step-60", "step": 60, "time": at(66)},
                     "restartHistory": [{"cause": "PodFailed", "message": "exit code 137",
                                         "attempt": 0, "newAttempt": 1, "time": at(52),
                                         "resumeFrom": "/c/dp/step-40"}]}}
    events = [{"reason": "Scheduled", "lastTimestamp": at(58), "metadata": {"uid": "e1"},
               "involvedObject": {"kind": "PodGroup", "namespace": "ml", "name": "dp-r1"}}]
    samples = [Sample(T0 + timedelta(seconds=s), step)
               for s, step in ((40, 20), (45, 40), (61, 40), (66, 60))]
    world = World(trainingjobs=[tj], events=events, samples={("ml", "dp"): samples},
                  now=T0 + timedelta(seconds=70))
    (r,) = job_info(tj, world).recoveries
    assert (r.resume_step, r.resume_time) == (40, T0 + timedelta(seconds=45))
    assert r.first_step == T0 + timedelta(seconds=66)
    assert r.lost_seconds == 21.0 and r.lost_steps is not None and r.lost_steps > 0


def test_the_datasets_page_shows_each_nodes_cache_state() -> None:
    from trainmaster.operator._warm_targets import NodeCache, state_patch
    from trainmaster.ui._datasets import dataset_infos

    nodes = []
    for name, state in (("n0", NodeCache("ready")), ("n1", NodeCache(
            "failed", reason="cannot be placed: 0/9 nodes are available: 1 Insufficient cpu")),
                        ("n2", NodeCache("evicted", reason="evicted by books"))):
        made = node(name, "leaf-0")
        patch = state_patch("wiki", state)["metadata"]
        made["metadata"].setdefault("labels", {}).update(patch["labels"])
        made["metadata"].setdefault("annotations", {}).update(patch["annotations"])
        nodes.append(made)
    world = World(nodes=nodes)
    [wiki] = dataset_infos(world)
    assert wiki.counts == {"warming": 0, "ready": 1, "failed": 1, "evicted": 1}
    with served(create_app(FixedSource(world))) as port:
        conn = http.client.HTTPConnection("127.0.0.1", port, timeout=30)
        conn.request("GET", "/datasets")
        resp = conn.getresponse()
        body = resp.read().decode()
    assert resp.status == 200 and '<th scope="col">' in body
    assert 'id="dataset-wiki"' in body and "Insufficient cpu" in body
    assert '<td class="cache-evicted">evicted</td>' in body
    assert 'href="/datasets"' in body  # in the masthead
