"""One truth for "why": the web view's why pending, `trainmaster status --json` and the
scheduler's own Event say the same thing, on the real local control plane.

Held-out scenario: queue b borrows 8 of queue a's GPUs; a's next gang fits a's GPU quota
(the scheduler would take its GPUs back), but a's cpu quota decides. And an elastic gang
placed at one of its three members shows 1..3, running 1, in both views.
"""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest
import yaml

from tests.conftest import LocalCluster
from tests.scheduler.live import SchedulerProcess, Scratch, processes, wait_for
from trainmaster.kubeclient import SyncKube, api_path, node_path, pod_path, podgroup_path
from trainmaster.status import ledger_entries, scheduler_configs, scheduler_queues
from trainmaster.ui import World, pending_gangs, queue_infos, why_pending

pytestmark = pytest.mark.integration

QUEUE_LABEL = "kueue.x-k8s.io/queue-name"


def _gang(scratch: Scratch, name: str, size: int, queue: str | None, cpu: str,
          domain: str = "leaf", max_members: int | None = None) -> None:
    scratch.create_group(name, 1 if max_members else size, domain=domain,
                         mode="required" if domain != "cluster" else "preferred")
    if max_members:
        scratch.custom.patch_namespaced_custom_object(
            "scheduling.x-k8s.io", "v1alpha1", scratch.namespace, "podgroups", name,
            {"metadata": {"annotations": {"trainmaster.io/max-members": str(max_members)}}})
    pods = []
    for i in range(size):
        body = scratch.pod(f"{name}-{i}", gpus=8, group=name)
        body["spec"]["containers"][0]["resources"]["requests"]["cpu"] = cpu
        if queue:
            body["metadata"]["labels"][QUEUE_LABEL] = queue
        pods.append(body)
    scratch.create_pods(pods)


def _world(kubeconfig: Path, namespace: str) -> World:
    """What `trainmaster ui` watches, listed once."""
    with SyncKube.connect(kubeconfig) as kube:
        def get(path: str, selector: str | None = None) -> list[dict[str, Any]]:
            return kube.run(kube.kube.list(path, selector))

        maps = get(api_path("v1", "configmaps", namespace))
        return World(nodes=get(node_path()), pods=get(pod_path(namespace)),
                     podgroups=get(podgroup_path(namespace)),
                     events=get(api_path("v1", "events", namespace)),
                     queues=scheduler_queues(maps), configs=scheduler_configs(maps),
                     ledger=ledger_entries(maps))


def _status_json(kubeconfig: Path, namespace: str) -> dict[str, Any]:
    out = subprocess.run(
        [sys.executable, "-m", "trainmaster", "status", "--json", "--kubeconfig",
         str(kubeconfig), "-n", namespace, "--prometheus", "off"],
        capture_output=True, text=True, timeout=120, check=True)
    doc: dict[str, Any] = json.loads(out.stdout)
    return doc


def test_ui_status_and_the_schedulers_event_agree_on_borrowing_cpu_quota_and_elastic(
    local_cluster: LocalCluster, scratch: Scratch, tmp_path: Path
) -> None:
    for leaf, count in (("leaf-a", 3), ("leaf-b", 2)):
        for i in range(count):
            scratch.add_node(f"{leaf}-{i}", leaf=leaf)
    wait_for(scratch.nodes_ready, "scratch nodes Ready")
    a, b, cohort = f"a-{scratch.tag}", f"b-{scratch.tag}", f"c-{scratch.tag}"
    config = {"schedulerName": scratch.scheduler, "preemption": False, "queues": [
        {"name": a, "nominalQuota": 16, "cohort": cohort,
         "resources": [{"name": "cpu", "nominalQuota": "8"}]},
        {"name": b, "nominalQuota": 16, "cohort": cohort}]}
    path = tmp_path / "config.yaml"
    path.write_text(yaml.safe_dump(config))
    # The config as the rendered stack publishes it, for status and the UI to read.
    scratch.core.create_namespaced_config_map(scratch.namespace, {
        "metadata": {"name": f"{scratch.scheduler}-config", "labels": {
            "app.kubernetes.io/component": "scheduler",
            "app.kubernetes.io/part-of": "trainmaster"}},
        "data": {"config.yaml": path.read_text()}})
    with processes() as procs:
        procs.append(SchedulerProcess(local_cluster.kubeconfig, scratch, tmp_path, "one",
                                      "--config", str(path)))
        _gang(scratch, "bor", 3, b, "1")  # 24 GPUs: b borrows 8 of a's
        _gang(scratch, "own", 1, a, "6")
        wait_for(lambda: {"bor-0", "bor-1", "bor-2", "own-0"} <= set(scratch.bound()),
                 "bor and own bound")
        _gang(scratch, "wait", 1, a, "4")  # GPUs within a's quota; cpu 6 + 4 > 8
        _gang(scratch, "el", 3, None, "1", domain="cluster", max_members=3)

        def event() -> str | None:
            for e in scratch.core.list_namespaced_event(scratch.namespace).items:
                if e.reason == "FailedScheduling" and e.involved_object.name == "wait":
                    return str(e.message)
            return None

        said = wait_for(event, "the scheduler's FailedScheduling Event on wait")
        assert f"queue {a}: 6 cpu of 8 cpu in use, gang needs 4 cpu" in said

        def agreed() -> tuple[Any, ...] | None:
            world = _world(local_cluster.kubeconfig, scratch.namespace)
            if world.ledger is None:
                return None
            whys = {w.pending.name: w for w in why_pending(world)}
            doc = _status_json(local_cluster.kubeconfig, scratch.namespace)
            rows = {p["gang"]: p for p in doc["pending"]}
            if "wait" not in whys or "wait" not in rows or "el" not in rows \
                    or whys["wait"].quota != said:
                return None
            return world, whys, rows

        world, whys, rows = wait_for(agreed, "the UI to give the scheduler's answer", 120)
        ui, st = whys["wait"], rows["wait"]
        assert ui.quota == st["quota"] == said
        assert said in ui.pending.reason and said in st["reason"]
        assert ui.pending.queue == st["queue"] == a
        assert st["would_start"] == "quota admits it once its own queue's running gangs finish"
        # b's borrowing is the scheduler's published ledger, in both views.
        queues = {q.name: q for q in queue_infos(world)}
        assert (queues[b].in_use, queues[b].borrowed, queues[a].lent) == (24, 8, 8)
        ledger = {q["name"]: q for q in doc_queues(local_cluster.kubeconfig, scratch)}
        assert (ledger[b]["in_use"], ledger[b]["borrowed"]) == (24, 8)
        # The elastic gang: placed at 1 of 3, the rest pending; both views say so.
        wait_for(lambda: sum(n.startswith("el-") for n in scratch.bound()) == 1, "el at 1")
        el = wait_for(lambda: next((p for p in pending_gangs(
            _world(local_cluster.kubeconfig, scratch.namespace)) if p.name == "el"
            and p.running == 1), None), "el running 1 in the UI")
        assert el.size == "1..3 (running 1)"
        row = wait_for(lambda: next((p for p in _status_json(
            local_cluster.kubeconfig, scratch.namespace)["pending"] if p["gang"] == "el"
            and p["size"] == el.size), None), "el in status")
        assert row["size"] == "1..3 (running 1)"


def doc_queues(kubeconfig: Path, scratch: Scratch) -> list[dict[str, Any]]:
    queues: list[dict[str, Any]] = _status_json(kubeconfig, scratch.namespace)["queues"]
    return queues


def test_an_elastic_shrink_preemption_appears_in_the_queue_table(
    local_cluster: LocalCluster, scratch: Scratch, tmp_path: Path
) -> None:
    from tests.scheduler.test_queues_live import priority_classes

    for i in range(3):
        scratch.add_node(f"n{i}", leaf="leaf-a")
    wait_for(scratch.nodes_ready, "scratch nodes Ready")
    path = tmp_path / "config.yaml"
    path.write_text(yaml.safe_dump({"queues": [], "preemption": True}))
    with priority_classes(scratch, {"high": 1000}) as classes, \
            processes() as procs:
        procs.append(SchedulerProcess(local_cluster.kubeconfig, scratch, tmp_path, "one",
                                      "--config", str(path)))
        # An elastic gang of 1..3 fills the leaf at 3.
        _gang(scratch, "el", 3, None, "1", max_members=3)
        wait_for(lambda: sum(n.startswith("el-") for n in scratch.bound()) == 3, "el at 3")
        # A higher-priority one-node gang: shrinking el by one member is the cheap way.
        scratch.create_group("hi", 1)
        body = scratch.pod("hi-0", gpus=8, group="hi")
        body["spec"]["priorityClassName"] = classes["high"]
        scratch.create_pods([body])

        def preempted() -> Any:
            return [e for e in scratch.core.list_namespaced_event(scratch.namespace).items
                    if e.reason == "Preempted" and e.involved_object.name == "el"] or None

        (event,) = wait_for(preempted, "the scheduler's Preempted Event on el", 180)
        assert "shrunk by" in event.message, event.message
        world = _world(local_cluster.kubeconfig, scratch.namespace)
        queues = {q.name: q for q in queue_infos(world)}
        (row,) = queues["default"].preemptions  # hi's queue: it names none
        assert row.shrink
        # How far it shrinks is the scheduler's choice; the table shows that choice.
        assert (row.victim, row.preemptor) == (f"{scratch.namespace}/el",
                                               f"{scratch.namespace}/hi")
        assert 1 <= row.members < 3 and row.gpus == 8 * row.members
        assert (f"shrunk by {row.members} members (elastic): {row.gpus} GPUs freed, "
                f"{row.work_lost} GPU-seconds of rescale") in event.message
