"""`trainmaster status`: the resource view, pure and on a known cluster state."""

from __future__ import annotations

import json
from typing import Any

import pytest

from tests.operator.builders import T0, at, make_node, make_pod
from tests.operator.kit import OperatorEnv, job_doc, wait_for
from trainmaster.api import format_time
from trainmaster.cli import main
from trainmaster.status import age, summarize, topology_levels

SPINE, LEAF = "topology.trainmaster.io/spine", "topology.trainmaster.io/leaf"


def _node(name: str, spine: str, leaf: str, **kw: Any) -> dict[str, Any]:
    return make_node(name, labels={SPINE: spine, LEAF: leaf}, **kw)


def _pod(node: str, gpus: int, phase: str = "Running") -> dict[str, Any]:
    pod = make_pod(0, phase, node=node)
    pod["spec"]["containers"] = [{"resources": {"requests": {"nvidia.com/gpu": str(gpus)}}}]
    return pod


def _tj(name: str, **status: Any) -> dict[str, Any]:
    return {"metadata": {"name": name, "namespace": "ml",
                         "creationTimestamp": format_time(T0)},
            "spec": {"nodes": 2}, "status": status}


def test_summarize_counts_gpus_per_switch_and_lists_jobs_fences_and_pending() -> None:
    nodes = [
        _node("n0", "spine-0", "leaf-0"),
        _node("n1", "spine-0", "leaf-0", fenced=True),
        _node("n2", "spine-0", "leaf-1", ready="False"),
        _node("n3", "spine-1", "leaf-10"),
        _node("n4", "spine-1", "leaf-2"),
    ]
    pods = [_pod("n0", 8), _pod("n1", 4), _pod("n3", 2), _pod("n3", 8, phase="Succeeded")]
    tjs = [
        _tj("a", phase="Running", restarts=2, attempt=2,
            lastCheckpoint={"path": "/c/a/step-5", "step": 5}),
        _tj("b", phase="Pending", gang="b-r0", pendingReason="unschedulable: no GPUs"),
        _tj("c", phase="Restarting", gang="c-r1", restartAt=format_time(at(600))),
    ]
    view = summarize(nodes, pods, tjs, at(90))
    assert view.levels == ["spine", "leaf"]
    rows = {(s.level, s.switch): s for s in view.switches}
    assert [s.switch for s in view.switches] == [
        "spine-0", "leaf-0", "leaf-1", "spine-1", "leaf-2", "leaf-10"]
    leaf0 = rows[("leaf", "leaf-0")]
    assert (leaf0.nodes, leaf0.usable, leaf0.gpus, leaf0.used, leaf0.free, leaf0.fenced) == (
        2, 1, 16, 12, 0, 1)
    spine0 = rows[("spine", "spine-0")]
    assert (spine0.nodes, spine0.usable, spine0.gpus, spine0.used, spine0.free) == (
        3, 1, 24, 12, 0)
    assert rows[("leaf", "leaf-10")].free == 6
    assert [(f.name, f.switch) for f in view.fenced] == [("n1", "leaf-0")]
    a = view.jobs[0]
    assert (a.name, a.phase, a.restarts, a.checkpoint, a.step, a.age_seconds) == (
        "a", "Running", 2, "/c/a/step-5", 5, 90.0)
    assert [(p.job, p.reason) for p in view.pending] == [
        ("b", "unschedulable: no GPUs"),
        ("c", f"restart backoff until {format_time(at(600))}"),
    ]
    json.dumps(view.to_json())


def test_queues_show_gpus_in_use_quota_and_borrowed() -> None:
    def labelled(node: str, gpus: int, queue: str, phase: str = "Running") -> dict[str, Any]:
        pod = _pod(node, gpus, phase)
        pod["metadata"]["labels"]["kueue.x-k8s.io/queue-name"] = queue
        return pod

    pods = [labelled("n0", 8, "research"), labelled("n1", 8, "research"),
            labelled("n2", 8, "research", phase="Succeeded"), labelled("n3", 4, "adhoc"),
            _pod("n4", 8)]
    queues = [{"name": "research", "nominalQuota": 8, "cohort": "all"},
              {"name": "prod", "nominalQuota": 32, "cohort": "all"}, {"name": "default"}]
    view = summarize([], pods, [], at(1), queues)
    assert [(q.name, q.in_use, q.nominal_quota, q.borrowed, q.cohort) for q in view.queues] == [
        ("adhoc", 4, None, 0, None),
        ("default", 0, None, 0, None),
        ("prod", 0, 32, 0, "all"),
        ("research", 16, 8, 8, "all"),
    ]


def test_levels_are_ordered_top_down_by_how_many_switches_they_have() -> None:
    nodes = [_node(f"n{i}", f"spine-{i // 4}", f"leaf-{i // 2}") for i in range(8)]
    assert topology_levels(nodes) == ["spine", "leaf"]


@pytest.mark.parametrize(("seconds", "text"), [(5, "5s"), (300, "5m"), (3 * 3600 + 120,
                                                "3h02m"), (30 * 3600, "30h"), (3 * 86400, "3d")])
def test_age(seconds: float, text: str) -> None:
    assert age(seconds) == text


@pytest.mark.integration
def test_status_on_a_known_cluster_state(env: OperatorEnv,
                                         capsys: pytest.CaptureFixture[str]) -> None:
    env.create_job(job_doc("gpt", nodes=2))
    pods = env.wait_gang_running("gpt", 0, 2)
    env.wait_phase("gpt", "Running")
    env.report_checkpoint("gpt", "/checkpoints/gpt/step-400", 400)
    stuck = job_doc("stuck", nodes=1)
    stuck["checkpoint"]["volume"] = "no-such-claim"
    env.create_job(stuck)
    used = {p["spec"]["nodeName"] for p in pods}
    spare = next(n.metadata.name for n in env.core.list_node(label_selector="type=kwok").items
                 if n.metadata.name not in used)
    env.gpu_unhealthy(spare)
    wait_for(lambda: env.node(spare)["spec"].get("unschedulable"), "the operator to fence")
    wait_for(lambda: "unschedulable" in (env.status("stuck").get("pendingReason") or ""),
             "the stuck gang's reason")

    capsys.readouterr()
    assert main(["status", "--kubeconfig", str(env.kubeconfig), "-n", env.namespace,
                 "--json"]) == 0
    view = json.loads(capsys.readouterr().out)
    jobs = {j["name"]: j for j in view["jobs"]}
    assert set(jobs) == {"gpt", "stuck"}
    assert (jobs["gpt"]["phase"], jobs["gpt"]["restarts"], jobs["gpt"]["checkpoint"],
            jobs["gpt"]["step"]) == ("Running", 0, "/checkpoints/gpt/step-400", 400)
    (pending,) = view["pending"]
    assert pending["job"] == "stuck" and "no-such-claim" in pending["reason"]
    fenced = {f["name"]: f for f in view["fenced"]}
    assert fenced[spare]["reason"].startswith("GPUHealthy=False")
    node = env.node(pods[0]["spec"]["nodeName"])
    leaf = node["metadata"]["labels"]["topology.trainmaster.io/leaf"]
    row = next(s for s in view["switches"] if s["level"] == "leaf" and s["switch"] == leaf)
    assert row["used"] >= 8 and row["free"] <= row["gpus"] - 8
    spines = [s for s in view["switches"] if s["level"] == "spine"]
    leaves = [s for s in view["switches"] if s["level"] == "leaf"]
    assert sum(s["gpus"] for s in spines) == sum(s["gpus"] for s in leaves)
    assert sum(s["fenced"] for s in leaves) >= 1

    assert main(["status", "--kubeconfig", str(env.kubeconfig), "-n", env.namespace]) == 0
    table = capsys.readouterr().out
    for heading in ("GPUs by switch", "Training jobs", "Fenced nodes", "Pending gangs"):
        assert heading in table

    # Repaired: the agent reports the GPU healthy again, a person lifts the fence.
    env.set_gpu_condition(spare, "True", "Healthy", "")
    assert main(["operator", "unfence", spare, "--kubeconfig", str(env.kubeconfig)]) == 0
    node = env.node(spare)
    assert not node["spec"].get("unschedulable")
    assert "trainmaster.io/unhealthy" not in [t["key"] for t in node["spec"].get("taints") or []]


def _podgroup(name: str, members: int, owner: str | None = None) -> dict[str, Any]:
    meta: dict[str, Any] = {"name": name, "namespace": "ml"}
    if owner:
        meta["ownerReferences"] = [{"kind": owner, "name": "x"}]
    return {"metadata": meta, "spec": {"minMember": members}}


def _member(group: str, i: int, reason: str | None = None) -> dict[str, Any]:
    pod = make_pod(i, "Pending")
    pod["metadata"]["namespace"] = "ml"
    pod["metadata"].setdefault("labels", {})["scheduling.x-k8s.io/pod-group"] = group
    pod["spec"].pop("nodeName", None)
    if reason:
        pod["status"]["conditions"] = [{"type": "PodScheduled", "status": "False",
                                        "reason": "Unschedulable", "message": reason}]
    return pod


def test_pending_podgroup_gangs_count_beside_trainingjobs() -> None:
    # A bare PodGroup of 4 pods the scheduler cannot place is a pending gang too, with the
    # scheduler's reason; a TrainingJob's own PodGroup is its job row, not counted twice.
    why = "0/8 nodes are available: 8 Insufficient nvidia.com/gpu."
    unbound = [_member("big", i, why) for i in range(4)] + [_member("gpt-0", 0)]
    groups = [_podgroup("big", 4), _podgroup("gpt-0", 2, owner="TrainingJob"),
              _podgroup("done", 2)]
    view = summarize([], [], [_tj("gpt", phase="Pending", gang="gpt-0")], at(1),
                     podgroups=groups, unbound=unbound)
    assert [(p.job, p.gang, p.pods) for p in view.pending] == [("gpt", "gpt-0", None),
                                                                ("-", "big", 4)]
    assert view.pending[1].reason == f"4 of 4 pods unscheduled: Unschedulable: {why}"


def test_gpus_outside_any_queue_explain_the_switches_and_queues_difference() -> None:
    nodes = [_node("n1", "s0", "l0"), _node("n2", "s0", "l0")]
    queued = _pod("n1", 4)
    queued["metadata"].setdefault("labels", {})["kueue.x-k8s.io/queue-name"] = "prod"
    view = summarize(nodes, [queued, _pod("n2", 2)], [], at(1), [{"name": "prod"}])
    assert (view.gpus_used, view.gpus_outside_queues) == (6, 2)
    assert sum(q.in_use for q in view.queues) == 4


@pytest.mark.integration
def test_status_counts_a_pending_podgroup_gang(env: OperatorEnv) -> None:
    # Four pods of one PodGroup that no node can hold: the stock scheduler marks each
    # PodScheduled=False, and `trainmaster status` (the installed command) lists the gang.
    from tests.cli.entry import run

    env.custom.create_namespaced_custom_object(
        "scheduling.x-k8s.io", "v1alpha1", env.namespace, "podgroups",
        {"apiVersion": "scheduling.x-k8s.io/v1alpha1", "kind": "PodGroup",
         "metadata": {"name": "big"}, "spec": {"minMember": 4}})
    for i in range(4):
        env.core.create_namespaced_pod(env.namespace, {
            "apiVersion": "v1", "kind": "Pod",
            "metadata": {"name": f"big-{i}", "labels": {"scheduling.x-k8s.io/pod-group": "big"}},
            "spec": {"containers": [{"name": "c", "image": "busybox", "resources": {
                "requests": {"nvidia.com/gpu": "1000"}, "limits": {"nvidia.com/gpu": "1000"}}}]},
        })

    def all_unschedulable() -> bool:
        pods = env.core.list_namespaced_pod(env.namespace,
                                            label_selector="scheduling.x-k8s.io/pod-group=big")
        return len(pods.items) == 4 and all(
            any(c.type == "PodScheduled" and c.status == "False"
                for c in p.status.conditions or []) for p in pods.items)

    wait_for(all_unschedulable, "the stock scheduler to mark the gang unschedulable")
    proc = run("status", "--kubeconfig", str(env.kubeconfig), "-n", env.namespace, "--json")
    assert proc.returncode == 0, proc.stderr
    (gang,) = [p for p in json.loads(proc.stdout)["pending"] if p["gang"] == "big"]
    assert gang["pods"] == 4 and "Unschedulable" in gang["reason"]
    table = run("status", "--kubeconfig", str(env.kubeconfig), "-n", env.namespace).stdout
    assert "no pending gangs" not in table and "big" in table


def test_queues_come_from_the_schedulers_ledger_when_it_publishes_one() -> None:
    # One pod carries the research label; the other research GPUs are a gang's pods that
    # carry none (admitted through their PodGroup's queue): only the ledger knows them.
    labelled = _pod("n0", 8)
    labelled["metadata"]["labels"]["kueue.x-k8s.io/queue-name"] = "research"
    pods = [labelled, _pod("n1", 8), _pod("n2", 8)]
    ledger = [
        {"name": "research", "cohort": "all", "nominalQuota": 16, "flavorsUsage": [
            {"name": "default", "resources": [
                {"name": "nvidia.com/gpu", "total": 24, "borrowed": 8}]}]},
        {"name": "prod", "cohort": "all", "nominalQuota": 16, "flavorsUsage": [
            {"name": "default", "resources": [
                {"name": "nvidia.com/gpu", "total": 0, "borrowed": 0}]}]},
    ]
    queues = [{"name": "research", "nominalQuota": 16, "cohort": "all"}]
    by_labels = summarize([], pods, [], at(1), queues)
    assert [(q.name, q.in_use) for q in by_labels.queues] == [("research", 8)]
    assert by_labels.queues_from == "pod labels"

    view = summarize([], pods, [], at(1), queues, ledger=ledger)
    assert view.queues_from == "scheduler ledger"
    assert [(q.name, q.in_use, q.nominal_quota, q.borrowed, q.cohort) for q in view.queues] == [
        ("prod", 0, 16, 0, "all"), ("research", 24, 16, 8, "all")]


_FAIR_CONFIG = {
    "schedulerName": "trainmaster-scheduler",
    "fairSharing": {"enable": True},
    "cohorts": [{"name": "all", "resources": [{"name": "nvidia.com/gpu", "nominalQuota": 8}]},
                {"name": "research", "parent": "all", "fairSharing": {"weight": 2}},
                {"name": "prod", "parent": "all"}],
    "queues": [
        {"name": "a", "cohort": "research", "nominalQuota": 8, "fairSharing": {"weight": 1},
         "resources": [{"name": "cpu", "nominalQuota": "16"}]},
        {"name": "b", "cohort": "research", "nominalQuota": 8, "fairSharing": {"weight": 3}},
        {"name": "c", "cohort": "prod", "nominalQuota": 16},
        {"name": "free"},
    ],
}


def _entry(name: str, gpus: int, borrowed: int, cpu: int = 0) -> dict[str, Any]:
    resources = [{"name": "nvidia.com/gpu", "total": gpus, "borrowed": borrowed}]
    if cpu:
        resources.append({"name": "cpu", "total": cpu, "borrowed": 0})
    return {"name": name, "flavorsUsage": [{"name": "default", "resources": resources}]}


def test_status_json_shows_each_queues_share_against_its_entitlement() -> None:
    """`status --json` gains `fairness`: the cohort tree with each node's DRF share (the
    scheduler's own ``QueueLedger.share`` on the published usage), its entitlement, and
    per resource used, nominal, borrowed and lent."""
    from trainmaster.scheduler import SchedulerConfig, charged_ledger

    ledger = [_entry("a", 20, 12, cpu=12_000), _entry("b", 4, 0), _entry("c", 10, 0)]
    view = summarize([], [], [], at(1), _FAIR_CONFIG["queues"], ledger=ledger,
                     configs=[_FAIR_CONFIG])
    fair = json.loads(json.dumps(view.to_json()))["fairness"]
    assert fair["fair_sharing"] is True
    nodes = {(n["kind"], n["name"]): n for n in fair["nodes"]}
    # The tree, each cohort followed by its subtree; "free" has no quota: not in it.
    assert [(n["depth"], n["name"]) for n in fair["nodes"]] == [
        (0, "all"), (1, "prod"), (2, "c"), (1, "research"), (2, "a"), (2, "b")]
    assert nodes[("cohort", "research")]["children"] == ["a", "b"]
    a, b = nodes[("queue", "a")], nodes[("queue", "b")]
    assert (a["entitlement"], b["entitlement"]) == (0.25, 0.75)
    assert nodes[("cohort", "research")]["entitlement"] == pytest.approx(2 / 3)
    config = SchedulerConfig.from_mapping(_FAIR_CONFIG)
    same = charged_ledger(config.queues, config.cohorts, config.fair_sharing,
                          {"a": {"nvidia.com/gpu": 20, "cpu": 12_000},
                           "b": {"nvidia.com/gpu": 4}, "c": {"nvidia.com/gpu": 10}})
    assert a["share"] == pytest.approx(same.share("a")) and a["share"] == pytest.approx(0.75)
    assert b["share"] == 0.0 and b["held"] == pytest.approx(4 / 24, abs=1e-6)
    gpu_a = next(r for r in a["resources"] if r["name"] == "nvidia.com/gpu")
    assert (gpu_a["used"], gpu_a["nominal"], gpu_a["borrowed"], gpu_a["lent"]) == (20, 8, 12, 0)
    cpu_a = next(r for r in a["resources"] if r["name"] == "cpu")
    assert (cpu_a["used"], cpu_a["nominal"]) == (12_000, 16_000)
    gpu_b = next(r for r in b["resources"] if r["name"] == "nvidia.com/gpu")
    assert (gpu_b["used"], gpu_b["borrowed"], gpu_b["lent"]) == (4, 0, 4)
    research = nodes[("cohort", "research")]
    gpu_r = next(r for r in research["resources"] if r["name"] == "nvidia.com/gpu")
    assert (gpu_r["used"], gpu_r["nominal"], gpu_r["borrowed"]) == (24, 16, 8)
    # The 8 research borrows from the tree: the root's own 8 idle and prod's 6 idle,
    # pro rata.
    gpu_c = next(r for r in nodes[("queue", "c")]["resources"] if r["name"] == "nvidia.com/gpu")
    assert gpu_c["lent"] == 8 * 6 // 14


def test_status_fairness_by_pod_labels_without_a_ledger_and_in_the_table() -> None:
    from rich.console import Console

    from trainmaster.status import render_view

    pods = []
    for node, queue in (("n0", "a"), ("n1", "a"), ("n2", "b")):
        pod = _pod(node, 8)
        pod["metadata"]["labels"]["kueue.x-k8s.io/queue-name"] = queue
        pods.append(pod)
    view = summarize([], pods, [], at(1), _FAIR_CONFIG["queues"], configs=[_FAIR_CONFIG])
    assert view.queues_from == "pod labels" and view.fairness is not None
    a = next(n for n in view.fairness["nodes"] if n["name"] == "a")
    assert a["resources"][-1]["name"] == "nvidia.com/gpu" and a["resources"][-1]["used"] == 16
    assert a["share"] == pytest.approx(8 / 16)
    console = Console(record=True, width=200)
    render_view(view, console)
    text = console.export_text()
    assert "Queue fair sharing (fair sharing on" in text
    assert "nvidia.com/gpu 16/8 borrowed 8" in text and "25%" in text and "0.500" in text
    # No quota anywhere: no fairness section.
    plain = summarize([], pods, [], at(1), [{"name": "a"}], configs=[{"queues": [{"name": "a"}]}])
    assert plain.fairness is None


def test_the_published_ledger_carries_every_resource_to_status() -> None:
    """What the scheduler publishes (``ledger_document`` of its ledger's usage) gives
    status the same shares the scheduler's ledger has, cpu included."""
    from trainmaster.scheduler import SchedulerConfig, charged_ledger
    from trainmaster.scheduler.runtime.ledger import ledger_document

    config = SchedulerConfig.from_mapping(_FAIR_CONFIG)
    live = charged_ledger(config.queues, config.cohorts, config.fair_sharing,
                          {"a": {"nvidia.com/gpu": 12, "cpu": 20_000}, "b": {"cpu": 500}})
    doc = ledger_document(live.usage())
    a = next(q for q in doc if q["name"] == "a")["flavorsUsage"][0]["resources"]
    assert a == [{"name": "nvidia.com/gpu", "total": 12, "borrowed": 4},
                 {"name": "cpu", "total": 20_000, "borrowed": 4_000}]
    view = summarize([], [], [], at(1), _FAIR_CONFIG["queues"], ledger=doc,
                     configs=[_FAIR_CONFIG])
    assert view.fairness is not None
    shown = {n["name"]: n for n in view.fairness["nodes"] if n["kind"] == "queue"}
    assert shown["a"]["share"] == pytest.approx(live.share("a"))
    assert shown["a"]["share"] == pytest.approx(max(4 / 16, 4_000 / 16_000))


def test_status_shows_each_datasets_cache_state_per_node() -> None:
    from rich.console import Console

    from trainmaster.operator._warm_targets import NodeCache, state_patch
    from trainmaster.status import render_view

    nodes = []
    for name, state in (("n1", NodeCache("ready", time="t1")),
                        ("n2", NodeCache("failed", reason="cannot be placed: no cpu")),
                        ("n3", NodeCache("warming")), ("n10", NodeCache("ready"))):
        node = _node(name, "spine-0", "leaf-0")
        patch = state_patch("wiki", state)["metadata"]
        node["metadata"].setdefault("labels", {}).update(patch["labels"])
        node["metadata"].setdefault("annotations", {}).update(patch["annotations"])
        nodes.append(node)
    view = summarize(nodes, [], [], at(1))
    [cache] = view.to_json()["caches"]
    assert cache["dataset"] == "wiki"
    assert cache["counts"] == {"warming": 1, "ready": 2, "failed": 1, "evicted": 0}
    assert [(r["node"], r["state"]) for r in cache["nodes"]] == [
        ("n2", "failed"), ("n3", "warming"), ("n1", "ready"), ("n10", "ready")]
    assert cache["nodes"][0]["reason"] == "cannot be placed: no cpu"
    console = Console(record=True, width=200)
    render_view(view, console)
    text = console.export_text()
    assert "Dataset cache" in text
    assert "n2: failed (cannot be placed: no cpu)" in text and "n3: warming" in text


def test_a_pending_gang_carries_the_schedulers_quota_answer_and_elastic_range() -> None:
    # a's cpu quota (8 cores, 6 in use as the scheduler published it) holds its gang of
    # 4 cores while b borrows a's GPUs: the answer is the scheduler's QueueLedger's, the
    # same text the web view's why pending gives (tests/ui/test_views.py).
    config = {"queues": [
        {"name": "a", "nominalQuota": 16, "cohort": "c",
         "resources": [{"name": "cpu", "nominalQuota": "8"}]},
        {"name": "b", "nominalQuota": 8, "cohort": "c"}]}
    ledger = [_entry("a", 8, 0, cpu=6000), _entry("b", 16, 8)]
    waiting = _member("wait", 0)
    waiting["metadata"]["labels"]["kueue.x-k8s.io/queue-name"] = "a"
    waiting["spec"]["containers"] = [{"name": "c", "resources": {"requests": {
        "cpu": "4", "nvidia.com/gpu": "8"}}}]
    elastic = _podgroup("el", 1)
    elastic["metadata"]["annotations"] = {"trainmaster.io/max-members": "3"}
    running = _member("el", 1)
    running["spec"]["nodeName"], running["status"]["phase"] = "n0", "Running"
    view = summarize([], [running], [], at(1), podgroups=[_podgroup("wait", 1), elastic],
                     unbound=[waiting, _member("el", 2), _member("el", 3)], ledger=ledger,
                     configs=[config])
    rows = {p.gang: p for p in view.pending}
    assert rows["wait"].queue == "a"
    assert rows["wait"].quota == ("queue a: 6 cpu of 8 cpu in use, gang needs 4 cpu; cohort "
                                  "c has only 2 cpu idle")
    assert rows["wait"].would_start == ("quota admits it once its own queue's running gangs "
                                        "finish")
    assert rows["el"].size == "1..3 (running 1)" and rows["wait"].size == "1"
    assert rows["el"].quota is None  # the default queue: no quota
