"""Domain-freeing preemption on the real local control plane at 1,024 kwok nodes.

64 leaves x 16 nodes of 8 GPUs, every GPU taken by running gangs of this scheduler (4
pods x 8 GPUs, four per leaf, priority 10) whose PodGroups carry last-checkpoint
annotations: all but two checkpointed when they started; two gangs of one leaf
checkpoint again just before the preemptor arrives, so together they lose the least
work in the cluster. A 16-pod gang of 4 GPUs a pod (priority 1000), required in one
leaf, arrives: the scheduler frees that one leaf by evicting exactly those two gangs,
touches nothing else, says so in Events on the victims and on the preemptor, and binds
the gang there. The time from its arrival (its last pod created: a gang can be placed
only once it is whole) to its last bind is printed; the target is 2 s, the assertion a
bound a loaded machine does not break. The binds are seen through a watch (a poll of
the pods lagged seconds behind them on the loaded machine), and the scheduler's log
splits the time: arrival -> decision, the evictions, their answer -> placed, the
binds.
"""

from __future__ import annotations

import re
import threading
import time
from concurrent.futures import ThreadPoolExecutor
from datetime import datetime
from pathlib import Path

import pytest
import yaml
from kubernetes import watch

from tests.conftest import LocalCluster
from tests.scheduler.live import (
    PODGROUPS,
    TEST_LABEL,
    SchedulerProcess,
    Scratch,
    processes,
    wait_for,
)
from tests.scheduler.test_queues_live import _events_of, priority_classes
from trainmaster.scheduler.runtime.events import now_rfc3339

pytestmark = pytest.mark.integration

LEAVES, PER_LEAF, GANGS_PER_LEAF = 64, 16, 4
CHEAP_LEAF = 37
BIND_TARGET_S = 2.0
BIND_BOUND_S = 10.0


def _all_ready(scratch: Scratch) -> bool:
    """Every scratch node Ready and untainted by the node controller: one list call, not
    a read per node (1,024 of them)."""
    nodes = scratch.core.list_node(label_selector=f"{TEST_LABEL}={scratch.tag}").items
    if len(nodes) < len(scratch.nodes):
        return False
    lagging = ("node.kubernetes.io/not-ready", "node.kubernetes.io/unreachable")
    return all(
        any(c.type == "Ready" and c.status == "True" for c in n.status.conditions or [])
        and not any(t.key in lagging for t in n.spec.taints or []) for n in nodes)


def _group(scratch: Scratch, name: str, size: int, checkpoint: str | None) -> None:
    annotations = {"trainmaster.io/topology-domain": "leaf",
                   "trainmaster.io/topology-mode": "required"}
    if checkpoint:
        annotations["trainmaster.io/last-checkpoint-time"] = checkpoint
    scratch.custom.create_namespaced_custom_object(*PODGROUPS[:2], scratch.namespace,
                                                   PODGROUPS[2], {
        "apiVersion": "scheduling.x-k8s.io/v1alpha1", "kind": "PodGroup",
        "metadata": {"name": name, "annotations": annotations},
        "spec": {"minMember": size},
    })


class _BindWatch:
    """Wall time at which each pod of the gang was first seen bound, from a pod watch
    started before the gang exists."""

    def __init__(self, scratch: Scratch, gang: str, size: int) -> None:
        self.bound: dict[str, tuple[str, float]] = {}
        self.done = threading.Event()
        self._watch = watch.Watch()
        self._thread = threading.Thread(target=self._run, args=(scratch, gang, size),
                                        daemon=True)
        self._thread.start()

    def _run(self, scratch: Scratch, gang: str, size: int) -> None:
        for event in self._watch.stream(
                scratch.core.list_namespaced_pod, scratch.namespace, timeout_seconds=300,
                label_selector=f"scheduling.x-k8s.io/pod-group={gang}"):
            pod = event["object"]
            if pod.spec.node_name and pod.metadata.name not in self.bound:
                self.bound[pod.metadata.name] = (pod.spec.node_name, time.time())
                if len(self.bound) == size:
                    self.done.set()
                    self._watch.stop()

    def wait(self, timeout: float) -> dict[str, str]:
        assert self.done.wait(timeout), f"only {len(self.bound)} pods bound"
        return {name: node for name, (node, _) in self.bound.items()}

    @property
    def last(self) -> float:
        return max(at for _, at in self.bound.values())


def _log_times(log: Path, gang: str) -> dict[str, float]:
    """Wall times of the scheduler's log lines about the gang: its preemption decision,
    its evictions done, its placement, its binds answered."""
    marks = {"decided": f"gang {gang} preempts ", "evicted": f"gang {gang}: ",
             "placed": ": 1 gangs placed", "bound": f"gang {gang}: binds answered"}
    out: dict[str, float] = {}
    for line in log.read_text().splitlines():
        stamp = re.match(r"(\d{4}-\d\d-\d\d \d\d:\d\d:\d\d,\d{3}) ", line)
        if stamp is None:
            continue
        at = datetime.strptime(stamp.group(1), "%Y-%m-%d %H:%M:%S,%f").timestamp()
        for key, mark in marks.items():
            if key not in out and mark in line and (key != "evicted" or "evicted in" in line) \
                    and (key == "decided" or "decided" in out):
                out[key] = at
    return out


def test_a_required_leaf_gang_frees_the_cheapest_leaf_at_1024_nodes(
    local_cluster: LocalCluster, scratch: Scratch, tmp_path: Path
) -> None:
    with ThreadPoolExecutor(8) as pool:  # 1,024 creations: a few at a time
        list(pool.map(lambda ln: scratch.add_node(f"l{ln[0]:02d}-n{ln[1]:02d}",
                                                  leaf=f"leaf-{ln[0]:02d}"),
                      [(leaf, n) for leaf in range(LEAVES) for n in range(PER_LEAF)]))
    wait_for(lambda: _all_ready(scratch), "1,024 scratch nodes Ready", 600)
    config = tmp_path / "config.yaml"
    config.write_text(yaml.safe_dump({"queues": [], "preemption": True}))
    with priority_classes(scratch, {"low": 10, "high": 1000}) as pc, processes() as procs:
        procs.append(SchedulerProcess(local_cluster.kubeconfig, scratch, tmp_path, "one",
                                      "--config", str(config)))
        # The running gangs: bound at creation (nodeName) to this scheduler's name, as
        # if it had placed them; a gang's four pods on four nodes of its leaf.
        started = now_rfc3339()
        gangs = [(leaf, g) for leaf in range(LEAVES) for g in range(GANGS_PER_LEAF)]

        def start(leaf_gang: tuple[int, int]) -> None:
            leaf, g = leaf_gang
            gang = f"run-{leaf:02d}-{g}"
            _group(scratch, gang, 4, started)
            for i in range(4):
                body = scratch.pod(f"{gang}-{i}", gpus=8, group=gang)
                body["spec"]["nodeName"] = f"tm-{scratch.tag}-l{leaf:02d}-n{g * 4 + i:02d}"
                body["spec"]["priorityClassName"] = pc["low"]
                scratch.core.create_namespaced_pod(scratch.namespace, body)

        with ThreadPoolExecutor(8) as pool:
            list(pool.map(start, gangs))
        filler = 4 * len(gangs)
        running = wait_for(
            lambda: (pods := scratch.core.list_namespaced_pod(scratch.namespace).items)
            and sum(p.status.phase == "Running" for p in pods) == filler and pods,
            "1,024 filler pods Running", 600)
        before = {p.metadata.name: p.metadata.uid for p in running}
        time.sleep(5)  # every gang has now lost >= 5 s x 32 GPUs since it started
        cheap = [f"run-{CHEAP_LEAF}-{g}" for g in (1, 2)]
        for gang in cheap:  # these two checkpoint now: the cheapest pair in one leaf
            scratch.custom.patch_namespaced_custom_object(
                *PODGROUPS[:2], scratch.namespace, PODGROUPS[2], gang,
                {"metadata": {"annotations": {"trainmaster.io/last-checkpoint-time":
                                              now_rfc3339()}}})
        time.sleep(2)  # the scheduler's PodGroup watch has the annotations

        binds = _BindWatch(scratch, "big", 16)
        time.sleep(1)  # the watch is established
        arrived = time.time()
        _group(scratch, "big", 16, None)
        for i in range(16):
            body = scratch.pod(f"big-{i}", gpus=4, group="big")
            body["spec"]["priorityClassName"] = pc["high"]
            scratch.core.create_namespaced_pod(scratch.namespace, body)
        complete = time.time()  # the gang exists whole: it can be scheduled from now
        bound = binds.wait(120)
        done = binds.last
        leaf = f"tm-{scratch.tag}-leaf-{CHEAP_LEAF}"
        assert {scratch.leaf_of(n) for n in bound.values()} == {leaf}
        # exactly the two cheap gangs went; every other pod is the one it was
        after = {p.metadata.name: p.metadata.uid for p in
                 scratch.core.list_namespaced_pod(scratch.namespace).items
                 if not p.metadata.name.startswith("big-")}
        gone = {name for name, uid in before.items() if after.get(name) != uid}
        assert gone == {f"{g}-{i}" for g in cheap for i in range(4)}
        victims = _events_of(scratch, "Preempted", sorted(cheap))
        domain = f"tm-{scratch.tag}-spine/{leaf}"
        assert all(f"to free leaf {domain}" in e.message for e in victims)
        [preempting] = _events_of(scratch, "Preempting", ["big"])
        assert preempting.message.startswith("preempting 2 gangs (")
        assert f" to free leaf {domain}: " in preempting.message
        assert all(f"{scratch.namespace}/{g}" in preempting.message for g in cheap)
        marks = _log_times(procs[0].log, f"{scratch.namespace}/big")
        steps = [("arrival -> decision", complete, marks.get("decided")),
                 ("evictions", marks.get("decided"), marks.get("evicted")),
                 ("evictions answered -> placed", marks.get("evicted"), marks.get("placed")),
                 ("binds", marks.get("placed"), marks.get("bound")),
                 ("-> seen by the watch", marks.get("bound"), done)]
        print(f"\n1,024 nodes: the 16-pod gang bound {done - complete:.2f} s after its last "
              f"pod was created ({done - arrived:.2f} s after its PodGroup, the test "
              f"creating its pods one by one in between); "
              + ", ".join(f"{what} {end - start:.2f} s" for what, start, end in steps
                          if start is not None and end is not None)
              + f"; load average {Path('/proc/loadavg').read_text().split()[0]}")
        # The target is BIND_TARGET_S (met in six runs of six at load 20-31, median
        # 1.20 s: docs/benchmarks.md); the test holds the scheduler to a bound a loaded
        # machine does not break (a bind retried after a dropped API connection included).
        assert done - complete <= BIND_BOUND_S, (done - complete, done - arrived)
