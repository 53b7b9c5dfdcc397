"""An in-memory stand-in for ``trainmaster.kubeclient.Kube`` and builders of raw API
objects, for runtime unit tests that need no cluster. Requests go to a handler the test
chooses; watch streams are queues the test feeds. A runtime on it: ``fake_runtime``, and
one pass of it: ``settle`` / ``run_once``."""

from __future__ import annotations

import asyncio
import itertools
from collections.abc import AsyncIterator, Callable, Mapping
from typing import Any

from trainmaster.kubeclient import ApiError
from trainmaster.scheduler import SchedulerConfig, SchedulerRuntime

JSON = dict[str, Any]
Handler = Callable[[str, str, Any], JSON]

_uids = itertools.count(1)


def node_obj(
    name: str,
    *,
    gpus: int = 8,
    spine: str | None = "spine-0",
    leaf: str | None = "leaf-0",
    labels: Mapping[str, str] | None = None,
    taints: list[JSON] | None = None,
    unschedulable: bool = False,
    rv: str = "1",
) -> JSON:
    all_labels = {"kubernetes.io/hostname": name, **(labels or {})}
    if spine:
        all_labels["topology.trainmaster.io/spine"] = spine
    if leaf:
        all_labels["topology.trainmaster.io/leaf"] = leaf
    spec: JSON = {}
    if taints:
        spec["taints"] = taints
    if unschedulable:
        spec["unschedulable"] = True
    return {
        "metadata": {"name": name, "uid": f"node-{name}", "labels": all_labels,
                     "resourceVersion": rv},
        "spec": spec,
        "status": {"allocatable": {"nvidia.com/gpu": str(gpus), "cpu": "128",
                                   "memory": "1024Gi", "pods": "110"}},
    }


def pod_obj(
    name: str,
    *,
    namespace: str = "ns",
    gpus: int = 4,
    group: str | None = None,
    scheduler: str = "trainmaster-scheduler",
    node: str | None = None,
    phase: str = "Pending",
    uid: str | None = None,
    controlled: bool = True,
    rv: str = "1",
    deleting: bool = False,
    extra_spec: JSON | None = None,
) -> JSON:
    labels = {"scheduling.x-k8s.io/pod-group": group} if group else {}
    meta: JSON = {
        "name": name,
        "namespace": namespace,
        "uid": uid or f"uid-{name}-{next(_uids)}",
        "labels": labels,
        "resourceVersion": rv,
        "creationTimestamp": "2026-01-01T00:00:00Z",
    }
    if controlled:
        meta["ownerReferences"] = [{"apiVersion": "batch/v1", "kind": "Job", "name": "j",
                                    "uid": "job-uid", "controller": True}]
    if deleting:
        meta["deletionTimestamp"] = "2026-01-01T00:00:10Z"
    spec: JSON = {
        "schedulerName": scheduler,
        "containers": [{"name": "c", "resources": {"requests": {"nvidia.com/gpu": str(gpus)}}}],
        **(extra_spec or {}),
    }
    if node:
        spec["nodeName"] = node
    return {"metadata": meta, "spec": spec, "status": {"phase": phase}}


def group_obj(name: str, min_member: int, *, namespace: str = "ns", domain: str | None = None,
              mode: str | None = None) -> JSON:
    annotations = {}
    if domain:
        annotations["trainmaster.io/topology-domain"] = domain
    if mode:
        annotations["trainmaster.io/topology-mode"] = mode
    return {
        "metadata": {"name": name, "namespace": namespace, "uid": f"pg-{name}",
                     "annotations": annotations, "resourceVersion": "1",
                     "creationTimestamp": "2026-01-01T00:00:00Z"},
        "spec": {"minMember": min_member},
    }


def not_found(_: str, __: str, ___: Any) -> JSON:
    raise ApiError(404, "not found")


class FakeApi:
    """Records every call; ``handler(method, path, body)`` answers non-watch requests."""

    def __init__(self, handler: Handler | None = None) -> None:
        self.handler: Handler = handler or (lambda m, p, b: {})
        self.calls: list[tuple[str, str, Any]] = []
        self.streams: dict[str, asyncio.Queue[tuple[str, JSON] | ApiError | None]] = {}
        self.watch_params: list[tuple[str, dict[str, str]]] = []

    async def request(self, method: str, path: str, *, params: Mapping[str, str] | None = None,
                      body: Any = None, **_: Any) -> JSON:
        self.calls.append((method, path, body if body is not None else dict(params or {})))
        await asyncio.sleep(0)
        return self.handler(method, path, body if body is not None else dict(params or {}))

    async def get(self, path: str, params: Mapping[str, str] | None = None) -> JSON:
        return await self.request("GET", path, params=params)

    async def post(self, path: str, body: Any) -> JSON:
        return await self.request("POST", path, body=body)

    async def put(self, path: str, body: Any) -> JSON:
        return await self.request("PUT", path, body=body)

    async def patch(self, path: str, body: Any, patch_type: str = "strategic") -> JSON:
        return await self.request("PATCH", path, body=body)

    async def delete(self, path: str, body: Any = None) -> JSON:
        return await self.request("DELETE", path, body=body)

    async def warm(self, connections: int) -> int:
        return 0

    def stream(self, path: str) -> asyncio.Queue[tuple[str, JSON] | ApiError | None]:
        return self.streams.setdefault(path, asyncio.Queue())

    async def watch(self, path: str, params: Mapping[str, str], timeout_seconds: int = 300,
                    skip: Callable[[bytes], str | None] | None = None,
                    ) -> AsyncIterator[tuple[str, JSON]]:
        self.watch_params.append((path, dict(params)))
        queue = self.stream(path)
        while True:
            item = await queue.get()
            if item is None:
                return
            if isinstance(item, ApiError):
                raise item
            yield item

    def posts(self, suffix: str) -> list[tuple[str, Any]]:
        return [(p, b) for m, p, b in self.calls if m == "POST" and p.endswith(suffix)]


class Cluster:
    """Lists for the reflectors; records binds, condition patches and events."""

    def __init__(self, nodes: list[dict[str, Any]], pods: list[dict[str, Any]],
                 groups: list[dict[str, Any]],
                 upstream_groups: list[dict[str, Any]] | None = None,
                 jobsets: list[dict[str, Any]] | None = None,
                 workloads: list[dict[str, Any]] | None = None,
                 composites: list[dict[str, Any]] | None = None) -> None:
        self.lists = {"/apis/scheduling.k8s.io/v1beta1/workloads": workloads or [],
                      "/apis/scheduling.k8s.io/v1alpha3/compositepodgroups": composites or [],
                      "/api/v1/nodes": nodes, "/api/v1/pods": pods,
                      "/apis/scheduling.x-k8s.io/v1alpha1/podgroups": groups,
                      "/apis/scheduling.k8s.io/v1beta1/podgroups": upstream_groups or [],
                      "/apis/jobset.x-k8s.io/v1alpha2/jobsets": jobsets or []}
        self.binds: dict[str, str] = {}

    def __call__(self, method: str, path: str, body: Any) -> dict[str, Any]:
        if method == "GET":
            return {"items": self.lists[path], "metadata": {"resourceVersion": "1"}}
        if method == "POST" and path.endswith("/binding"):
            self.binds[body["metadata"]["name"]] = body["target"]["name"]
        return {}


def fake_runtime(handler: Handler, config: SchedulerConfig) -> tuple[FakeApi, SchedulerRuntime]:
    """A runtime of `config` on a FakeApi that `handler` (a Cluster, say) answers."""
    api = FakeApi(handler)
    return api, SchedulerRuntime(api, config)  # type: ignore[arg-type]


def settle(rt: SchedulerRuntime, *, drain: bool = False) -> None:
    """One pass: start, a step, until idle (its binds done), with `drain` its reports
    (Events, conditions) written too, then shut down."""

    async def run() -> None:
        await rt.start()
        await rt.step()
        await rt.idle()
        if drain:
            await rt.writer.drain(1)
        await rt.shutdown()

    asyncio.run(run())


def run_once(handler: Handler, config: SchedulerConfig, *,
             drain: bool = False) -> tuple[FakeApi, SchedulerRuntime]:
    """`fake_runtime` after one pass (`settle`)."""
    api, rt = fake_runtime(handler, config)
    settle(rt, drain=drain)
    return api, rt
