"""`trainmaster bench ui`: first paint of each view of `trainmaster ui` on a large world.

The world is built in memory the way `bench placement` builds its cluster (8-GPU nodes,
20 per leaf, 25 leaves per spine), as the API objects the UI watches: N nodes (1% fenced
by the operator, 1% cordoned, 0.5% NotReady), J TrainingJobs whose gangs' pods are bound
(one pod per node, 8 GPUs), a tenth of them pending, with checkpoints, restarts and the
scheduler's Events. Each view is fetched over HTTP from the real app served by uvicorn
on loopback: the time is the full round trip (server-side render included, which the
``Server-Timing`` header reports on its own).
"""

from __future__ import annotations

import contextlib
import http.client
import random
import re
import statistics
import threading
import time
from collections.abc import Iterator
from dataclasses import dataclass
from datetime import datetime, timedelta
from typing import Any

from trainmaster import api
from trainmaster.api import POD_GROUP_LABEL, QUEUE_LABEL, UTC, format_time

GPUS = 8
NODES_PER_LEAF = 20
LEAVES_PER_SPINE = 25


@dataclass(frozen=True)
class ViewTime:
    view: str
    path: str
    first_ms: float
    """The first fetch's round trip: the first paint (the view's model not built yet)."""
    round_trip_ms: float
    """Median over the runs."""
    first_cpu_ms: float
    """The server's CPU time for the first fetch (model + render; what a loaded machine
    does not inflate)."""
    render_ms: float
    worst_ms: float
    bytes: int


def _node(i: int, now: str, rng: random.Random) -> dict[str, Any]:
    leaf, spine = i // NODES_PER_LEAF, i // (NODES_PER_LEAF * LEAVES_PER_SPINE)
    node: dict[str, Any] = {
        "metadata": {"name": f"n{i:05d}", "uid": f"node-{i}", "labels": {
            api.topology_label("spine"): f"spine-{spine}",
            api.topology_label("leaf"): f"leaf-{leaf}"}},
        "spec": {},
        "status": {"allocatable": {"nvidia.com/gpu": str(GPUS), "cpu": "128",
                                   "memory": "2048Gi", "pods": "110"},
                   "conditions": [{"type": "Ready", "status": "True"}]},
    }
    roll = rng.random()
    if roll < 0.01:
        node["spec"] = {"unschedulable": True, "taints": [
            {"key": api.UNHEALTHY_TAINT, "value": "GPUHealthy", "effect": "NoSchedule"}]}
        node["metadata"]["annotations"] = {
            api.FENCED_ANNOTATION: f'{{"reason": "GPUHealthy=False: XID 79", "time": "{now}"}}'}
    elif roll < 0.02:
        node["spec"] = {"unschedulable": True}
    elif roll < 0.025:
        node["status"]["conditions"] = [{"type": "Ready", "status": "Unknown",
                                         "reason": "NodeStatusUnknown",
                                         "message": "Kubelet stopped posting node status."}]
    return node


def build_world(nodes: int = 10_000, jobs: int = 1_000, seed: int = 1) -> Any:
    from trainmaster.ui import Sample, World

    rng = random.Random(seed)
    now = datetime.now(UTC)
    stamp = format_time(now)
    node_objs = [_node(i, stamp, rng) for i in range(nodes)]
    usable = [n["metadata"]["name"] for n in node_objs if not n["spec"]
              and n["status"]["conditions"][0]["status"] == "True"]
    world = World(nodes=node_objs, queues=[
        {"name": "research", "nominalQuota": nodes * GPUS // 2, "cohort": "all"},
        {"name": "prod", "nominalQuota": nodes * GPUS // 2, "cohort": "all"}])
    cursor = 0
    for j in range(jobs):
        name, ns = f"job-{j:04d}", "team-" + str(j % 10)
        size = rng.choice((1, 2, 4, 4, 8, 8, 16))
        queue = "research" if j % 2 else "prod"
        created = now - timedelta(hours=rng.randint(1, 48))
        running = j % 10 != 0 and cursor + size <= len(usable) * 0.85
        attempt = rng.choice((0, 0, 0, 1, 2))
        gang = f"{name}-r{attempt}"
        status: dict[str, Any] = {"phase": "Running" if running else "Pending",
                                  "attempt": attempt, "restarts": attempt, "gang": gang}
        step = rng.randint(100, 100_000)
        if running:
            status["lastCheckpoint"] = {"path": f"/ckpt/{name}/step-{step}", "step": step,
                                        "time": format_time(now - timedelta(minutes=5))}
            status["runningSince"] = format_time(now - timedelta(minutes=30))
            status["restartHistory"] = [
                {"cause": "NodeFailure", "message": "node NotReady", "attempt": a,
                 "newAttempt": a + 1, "time": format_time(now - timedelta(hours=1)),
                 "resumeFrom": f"/ckpt/{name}/step-{step // 2}"} for a in range(attempt)]
            world.samples[(ns, name)] = [
                Sample(now - timedelta(minutes=10), step - 600),
                Sample(now - timedelta(minutes=5), step)]
            for r in range(size):
                node = usable[cursor]
                cursor += 1
                world.pods.append({
                    "metadata": {"name": f"{gang}-{r}", "namespace": ns, "uid": f"{gang}-{r}",
                                 "labels": {POD_GROUP_LABEL: gang,
                                            QUEUE_LABEL: queue}},
                    "spec": {"nodeName": node, "schedulerName": "trainmaster-scheduler",
                             "containers": [{"name": "t", "resources": {"requests": {
                                 "nvidia.com/gpu": str(GPUS)}}}]},
                    "status": {"phase": "Running"}})
            world.events.append({
                "metadata": {"uid": f"ev-{gang}"}, "reason": "Scheduled", "type": "Normal",
                "involvedObject": {"kind": "PodGroup", "namespace": ns, "name": gang},
                "message": f"bound {size} pods", "lastTimestamp": status["runningSince"]})
        else:
            status["pendingReason"] = "unschedulable: waiting for capacity"
        world.trainingjobs.append({
            "metadata": {"name": name, "namespace": ns, "uid": f"tj-{j}",
                         "creationTimestamp": format_time(created)},
            "spec": {"nodes": size, "gpusPerPod": GPUS, "queue": queue,
                     "priority": rng.choice((0, 100, 1000))},
            "status": status})
    return world


class _Changing:
    """A world the bench changes by hand (``replace``), as the store's would."""

    def __init__(self, world: Any) -> None:
        self._world = world
        self.version = 1

    def world(self) -> Any:
        return self._world

    def replace(self, world: Any) -> None:
        self._world = world
        self.version += 1

    async def wait_change(self, seen: int, timeout: float) -> int:
        import asyncio

        await asyncio.sleep(timeout)
        return self.version


def _fetch(port: int, view: str, path: str, runs: int) -> ViewTime:
    trips, renders, cpus, size = [], [], [], 0
    for _ in range(runs):
        conn = http.client.HTTPConnection("127.0.0.1", port, timeout=60)
        started = time.perf_counter()
        conn.request("GET", path)
        resp = conn.getresponse()
        body = resp.read()
        trips.append((time.perf_counter() - started) * 1000)
        conn.close()
        if resp.status != 200:
            raise RuntimeError(f"GET {path}: HTTP {resp.status}")
        timing = dict(re.findall(r"(\w+);dur=([\d.]+)", resp.getheader("Server-Timing") or ""))
        renders.append(float(timing.get("render", 0)))
        cpus.append(float(timing.get("cpu", 0)))
        size = len(body)
    return ViewTime(view, path, round(trips[0], 1), round(statistics.median(trips), 1),
                    round(cpus[0], 1), round(statistics.median(renders), 1),
                    round(max(trips), 1), size)


def _one_change(world: Any) -> Any:
    """The world after one watch event's worth of change: a node cordoned and a bound pod
    replaced (new objects, as the store's reflectors make them)."""
    from dataclasses import replace

    nodes, pods = list(world.nodes), list(world.pods)
    cordoned = {**nodes[0], "spec": {**nodes[0]["spec"], "unschedulable": True}}
    nodes[0] = cordoned
    if pods:
        pods[0] = {**pods[0], "metadata": {**pods[0]["metadata"], "resourceVersion": "2"}}
    return replace(world, nodes=nodes, pods=pods)


def bench_ui(nodes: int = 10_000, jobs: int = 1_000, runs: int = 5, seed: int = 1
             ) -> list[ViewTime]:
    """Each view's first paint and median on a cold app; then why pending with its state
    built at start (``create_app(warm=True)``, as `trainmaster ui` does) and after one
    change (the state follows by the change: ``Counterfactuals.advance``)."""
    from trainmaster.ui import FixedSource, create_app, pending_gangs

    world = build_world(nodes, jobs, seed)
    first_job = world.trainingjobs[1]["metadata"]
    # The gang the scheduler tries first: the first counterfactual the page asks for.
    first = pending_gangs(world)[0]
    pending = {"namespace": first.namespace, "name": first.name}
    paths = {
        "topology": "/topology",
        "leaf": "/topology/leaf-0",
        "jobs": "/jobs",
        "job": f"/jobs/{first_job['namespace']}/{first_job['name']}",
        "queues": "/queues",
        "pending": "/pending",
        "counterfactual": f"/pending/{pending['namespace']}/{pending['name']}/counterfactual",
    }
    with served(create_app(FixedSource(world))) as port:
        out = [_fetch(port, view, path, runs) for view, path in paths.items()]
    source = _Changing(world)
    app = create_app(source, warm=True)
    app.state.warming.join()
    with served(app) as port:
        out.append(_fetch(port, "pending, warmed", "/pending", runs))
        source.replace(_one_change(world))
        out.append(_fetch(port, "pending, after a change", "/pending", 1))
    return out


@contextlib.contextmanager
def served(app: Any) -> Iterator[int]:
    """``app`` served by uvicorn on a free loopback port, in a thread; yields the port."""
    import uvicorn

    config = uvicorn.Config(app, host="127.0.0.1", port=0, log_level="warning",
                            lifespan="off")
    server = uvicorn.Server(config)
    thread = threading.Thread(target=server.run, daemon=True)
    thread.start()
    try:
        while not server.started:
            if not thread.is_alive():
                raise RuntimeError("uvicorn did not start")
            time.sleep(0.02)
        yield server.servers[0].sockets[0].getsockname()[1]
    finally:
        server.should_exit = True
        thread.join(10)
