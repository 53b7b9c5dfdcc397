"""Observe a contender: when is every pod bound, and how good are the final bindings.

The watcher lists the namespace's pods and watches from that list's resource version
*before* the contender starts, so no bind is missed; the end time is when the last pod
is seen with a node. Placement quality comes from the final objects, not from anything
the contender reports about itself:

* ``overcommitted_nodes``: nodes where the requests of all pods bound there (every
  namespace) exceed allocatable for some resource;
* ``gangs_split_beyond_needed``: gangs (the pod-group label) spread over more leaves
  than their GPUs require, i.e. ceil(gang GPUs / GPUs of the largest leaf).
"""

from __future__ import annotations

import asyncio
import contextlib
import re
import time
from collections import defaultdict
from dataclasses import dataclass

from trainmaster import polling
from trainmaster.bench._workload import GPUS_PER_POD, leaves_needed
from trainmaster.kubeclient import GONE, ApiError, Kube, node_path, pod_path
from trainmaster.scheduler import POD_GROUP_LABEL, pod_requests, resource_map, topology_label

_UID = re.compile(rb'"uid":"([^"]+)"')
_RESOURCE_VERSION = re.compile(rb'"resourceVersion":"([^"]+)"')


class BindWatcher:
    """Counts the namespace's pods that have a node; ``done`` fires at ``expected``."""

    def __init__(self, api: Kube, namespace: str, expected: int) -> None:
        self._api = api
        self._path = pod_path(namespace)
        self._expected = expected
        self.bound: set[str] = set()
        self.finished_at: float | None = None
        self.first_at: float | None = None
        """When the first pod was seen bound (after ``start``)."""
        self.done = asyncio.Event()
        self.times: list[float] = []
        """When each pod was first seen bound after ``start`` (monotonic, in order)."""
        self.deleted_times: list[float] = []
        """When each DELETED event came after ``start`` (monotonic, in order)."""
        self._task: asyncio.Task[None] | None = None
        self._progress = time.monotonic()

    @property
    def last_at(self) -> float | None:
        """When the last pod was seen bound (after ``start``; None before the first)."""
        return None if self.first_at is None else self._progress

    async def start(self) -> None:
        self._progress = time.monotonic()
        page = await self._api.get(self._path)
        for pod in page.get("items") or ():
            self._see(pod)
        rv = str((page.get("metadata") or {}).get("resourceVersion", ""))
        self._task = asyncio.create_task(self._watch(rv))

    async def wait(self, timeout: float, stall: float) -> str:
        """Until every pod is bound (""), or why not: the timeout, or no bind for
        ``stall`` seconds (a contender that cannot finish should not hold the run)."""
        started = time.monotonic()
        while not self.done.is_set():
            now = time.monotonic()
            if now - started >= timeout:
                return f"timed out after {timeout:.0f}s"
            if now - self._progress >= stall:
                return f"no bind for {stall:.0f}s"
            await polling.wait_event(self.done, 1.0)
        return ""

    def _see(self, pod: dict[str, object]) -> None:
        spec = pod.get("spec")
        meta = pod.get("metadata")
        if isinstance(spec, dict) and isinstance(meta, dict) and spec.get("nodeName"):
            uid = str(meta.get("uid"))
            if uid not in self.bound:
                self.bound.add(uid)
                self._progress = time.monotonic()
                if self._task is not None:
                    self.times.append(self._progress)
                if self.first_at is None and self._task is not None:
                    self.first_at = self._progress
            if len(self.bound) >= self._expected and not self.done.is_set():
                self.finished_at = time.monotonic()
                self.done.set()

    def _skip(self, line: bytes) -> str | None:
        """Later updates of a pod already counted, and deletions (only timed), are not
        decoded (see Kube.watch): the watcher shares the 2 cores with the contender it
        measures."""
        deleted = line.startswith(b'{"type":"DELETED"')
        if deleted:
            self.deleted_times.append(time.monotonic())
        elif not line.startswith(b'{"type":"MODIFIED"'):
            return None
        found = _UID.search(line)
        if found is None or not (deleted or found.group(1).decode() in self.bound):
            return None
        version = _RESOURCE_VERSION.search(line, found.end())
        return None if version is None else version.group(1).decode()

    async def _watch(self, rv: str) -> None:
        while not self.done.is_set():
            try:
                async for kind, obj in self._api.watch(self._path, {"resourceVersion": rv},
                                                       skip=self._skip):
                    meta = obj.get("metadata") or {}
                    rv = str(meta.get("resourceVersion", rv))
                    if kind in ("ADDED", "MODIFIED"):
                        self._see(obj)
                    if self.done.is_set():
                        return
            except ApiError as err:
                if err.status == GONE:  # relist: still counts every bound pod
                    page = await self._api.get(self._path)
                    for pod in page.get("items") or ():
                        self._see(pod)
                    rv = str((page.get("metadata") or {}).get("resourceVersion", ""))
                else:
                    await asyncio.sleep(0.1)

    async def stop(self) -> None:
        if self._task is not None:
            self._task.cancel()
            with contextlib.suppress(asyncio.CancelledError):
                await self._task


@dataclass(frozen=True, slots=True)
class Quality:
    bound: int
    overcommitted_nodes: int
    gangs_split_beyond_needed: int
    split_gangs: tuple[str, ...]


async def placement_quality(api: Kube, namespace: str, leaf_level: str = "leaf") -> Quality:
    nodes = await api.list(node_path())
    alloc = {n["metadata"]["name"]: resource_map((n.get("status") or {}).get("allocatable"))
             for n in nodes}
    leaf_of = {n["metadata"]["name"]:
               (n["metadata"].get("labels") or {}).get(topology_label(leaf_level),
                                                       n["metadata"]["name"])
               for n in nodes}
    leaf_gpus: dict[str, int] = defaultdict(int)
    for name, res in alloc.items():
        leaf_gpus[leaf_of[name]] += res.get("nvidia.com/gpu", 0)
    biggest_leaf = max(leaf_gpus.values(), default=GPUS_PER_POD)

    used: dict[str, dict[str, int]] = defaultdict(lambda: defaultdict(int))
    everything = (await api.get(pod_path(),
                                {"fieldSelector": "status.phase!=Succeeded,status.phase!=Failed"}))
    for pod in everything["items"]:
        node = pod["spec"].get("nodeName")
        if node:
            for resource, qty in pod_requests(pod["spec"]).items():
                used[node][resource] += qty
            used[node]["pods"] += 1
    over = sum(
        1 for node, res in used.items()
        if node in alloc and any(q > alloc[node].get(r, 0) for r, q in res.items())
    )

    mine = await api.list(pod_path(namespace))
    gangs: dict[str, list[str]] = defaultdict(list)
    bound = 0
    for pod in mine:
        node = pod["spec"].get("nodeName")
        if node:
            bound += 1
        group = ((pod["spec"].get("schedulingGroup") or {}).get("podGroupName")
                 or (pod["metadata"].get("labels") or {}).get(POD_GROUP_LABEL))
        if group and node:
            gangs[group].append(node)
    split = tuple(sorted(
        g for g, where in gangs.items()
        if len({leaf_of.get(n, n) for n in where}) > leaves_needed(len(where), biggest_leaf)
    ))
    return Quality(bound, over, len(split), split)
