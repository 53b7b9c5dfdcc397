"""A new leader's start-up, in process: where the time to the first bind goes.

Not a test (timings on a shared machine are noise for an assertion); a tool::

    .venv/bin/python -m tests.scheduler.startup_profile 5000 10000          # figures
    .venv/bin/python -m tests.scheduler.startup_profile 5000 10000 profile  # + cProfile

The workload is ``trainmaster bench scheduler``'s (``trainmaster/bench/_workload.py``,
seed 1: 10,000 pods of 4 GPUs in 609 gangs) on the bench topology (8 GPUs a node, 20
nodes a leaf, 5 leaves a spine). The runtime is the real one: ``SchedulerRuntime.start``
(the three Reflectors list nodes, pods and PodGroups; the state is built; early pod
events replayed) and ``step`` until the first Binding POST (gangs assembled, the burst's
joint plan, the first chunk placed). The API is ``tests/scheduler/apifake.py``'s
in-memory ``Cluster``, so what is *not* in these figures is: interpreter and imports,
the HTTP transfer and JSON decoding of the lists (about 0.4 CPU s per 10,000 bench pods
with ``json.loads``), the API server's own work, and the Lease. CPU seconds
(``time.process_time``) are reported beside wall seconds because on a loaded machine
wall time is mostly waiting for a core.
"""

from __future__ import annotations

import asyncio
import cProfile
import pstats
import sys
import time
from typing import Any

from tests.scheduler.apifake import Cluster, FakeApi, node_obj
from trainmaster.bench._workload import pod, pod_group, workload
from trainmaster.scheduler import SchedulerConfig, SchedulerRuntime
from trainmaster.scheduler.state import ClusterState

STAMP = "2026-01-01T00:00:00Z"


def objects(nodes: int, pods: int) -> tuple[list[Any], list[Any], list[Any]]:
    node_objs = [node_obj(f"node-{i:04d}", spine=f"spine-{i // 100}", leaf=f"leaf-{i // 20}")
                 for i in range(nodes)]
    pod_objs: list[Any] = []
    groups: list[Any] = []
    for k, gang in enumerate(workload(pods, 1)):
        group = pod_group(gang, "bench")
        group["metadata"].update(uid=f"pg-{k}", resourceVersion="1", creationTimestamp=STAMP)
        groups.append(group)
        for i in range(gang.size):
            member = pod(gang, i, "bench", "trainmaster-scheduler")
            member["metadata"].update(uid=f"u-{gang.name}-{i}", resourceVersion="1",
                                      creationTimestamp=STAMP)
            member["status"] = {"phase": "Pending"}
            pod_objs.append(member)
    return node_objs, pod_objs, groups


class _Timed(Cluster):
    first_bind: float | None = None

    def __call__(self, method: str, path: str, body: Any) -> dict[str, Any]:
        if method == "POST" and path.endswith("/binding") and self.first_bind is None:
            self.first_bind = time.perf_counter()
        return super().__call__(method, path, body)


async def measure(nodes: int, pods: int) -> dict[str, float]:
    cluster = _Timed(*objects(nodes, pods))
    runtime = SchedulerRuntime(FakeApi(cluster),  # type: ignore[arg-type]
                               SchedulerConfig(levels=("spine", "leaf")))
    figures: dict[str, float] = {}
    build = runtime.cache.build_snapshot
    cpu0 = time.process_time()

    def timed_build() -> ClusterState:
        cpu = time.process_time()
        figures["list CPU s"] = cpu - cpu0
        state = build()
        figures["build state + replay pods CPU s"] = time.process_time() - cpu
        return state

    runtime.cache.build_snapshot = timed_build  # type: ignore[method-assign]
    wall0 = time.perf_counter()
    await runtime.start()
    figures["start wall s"] = time.perf_counter() - wall0
    cpu1 = time.process_time()
    step = asyncio.create_task(runtime.step())
    while cluster.first_bind is None and not step.done():
        await asyncio.sleep(0)
    figures["start to first bind CPU s"] = time.process_time() - cpu1
    figures["first bind wall s"] = (cluster.first_bind or time.perf_counter()) - wall0
    figures["to first bind CPU s"] = time.process_time() - cpu0
    await step
    await runtime.idle()
    await runtime.shutdown()
    figures["pods bound"] = len(cluster.binds)
    return {k: round(v, 3) for k, v in figures.items()}


def main(argv: list[str]) -> None:
    nodes = int(argv[0]) if argv else 5000
    pods = int(argv[1]) if len(argv) > 1 else 10000
    if len(argv) > 2 and argv[2] == "profile":
        profile = cProfile.Profile()
        figures = profile.runcall(asyncio.run, measure(nodes, pods))
        pstats.Stats(profile).sort_stats("cumulative").print_stats(40)
    else:
        figures = asyncio.run(measure(nodes, pods))
    print(f"{nodes} nodes, {pods} pods:", figures)


if __name__ == "__main__":
    main(sys.argv[1:])
