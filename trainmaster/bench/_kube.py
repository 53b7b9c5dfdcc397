"""The few API chores of the benchmark: CRD, namespaces, bulk create and delete.

Creation is concurrent (a bounded number of requests in flight) so that setting up a
thousand pending pods takes seconds, and every contender starts from the same state.
"""

from __future__ import annotations

import asyncio
import contextlib
import time
from collections.abc import Iterable
from typing import Any

from trainmaster.scheduler._kubeapi import ApiError, KubeApi

CRD_PATH = "/apis/apiextensions.k8s.io/v1/customresourcedefinitions"
PODGROUP_CRD = "podgroups.scheduling.x-k8s.io"


async def ensure_podgroup_crd(api: KubeApi, timeout: float = 60.0) -> None:
    """Install the PodGroup CRD if absent and wait until it is served."""
    from trainmaster.objects._crds import podgroup_crd

    try:
        await api.get(f"{CRD_PATH}/{PODGROUP_CRD}")
    except ApiError as err:
        if err.status != 404:
            raise
        try:
            await api.post(CRD_PATH, podgroup_crd())
        except ApiError as create_err:
            if create_err.status != 409:
                raise
    deadline = time.monotonic() + timeout
    while True:
        crd = await api.get(f"{CRD_PATH}/{PODGROUP_CRD}")
        conditions = (crd.get("status") or {}).get("conditions") or []
        if any(c.get("type") == "Established" and c.get("status") == "True" for c in conditions):
            try:
                await api.get("/apis/scheduling.x-k8s.io/v1alpha1/podgroups", {"limit": "1"})
                return
            except ApiError:
                pass
        if time.monotonic() > deadline:
            raise TimeoutError("the PodGroup CRD was not established in time")
        await asyncio.sleep(0.2)


async def create_namespace(api: KubeApi, name: str, labels: dict[str, str] | None = None) -> None:
    await api.post("/api/v1/namespaces",
                   {"apiVersion": "v1", "kind": "Namespace",
                    "metadata": {"name": name, "labels": labels or {}}})


async def create_all(api: KubeApi, objects: Iterable[tuple[str, dict[str, Any]]],
                     concurrency: int = 64) -> None:
    """POST every ``(collection path, body)``; raises on the first failure."""
    gate = asyncio.Semaphore(concurrency)

    async def one(path: str, body: dict[str, Any]) -> None:
        async with gate:
            for attempt in range(5):
                try:
                    await api.post(path, body)
                    return
                except ApiError as err:
                    if not err.transient or attempt == 4:
                        raise
                    await asyncio.sleep(0.1 * 2**attempt)

    await asyncio.gather(*(one(path, body) for path, body in objects))


async def count_pods(api: KubeApi, namespace: str) -> int:
    page = await api.get(f"/api/v1/namespaces/{namespace}/pods")
    return len(page.get("items") or ())


async def delete_namespace(api: KubeApi, namespace: str, timeout: float = 120.0) -> None:
    """Delete the pods at once (grace period 0), then the namespace; wait until the pods
    are gone so the next contender finds the nodes empty."""
    pods = f"/api/v1/namespaces/{namespace}/pods"
    try:
        await api.request("DELETE", pods, params={"gracePeriodSeconds": "0"}, timeout=timeout)
    except ApiError as err:
        if err.status != 404:
            raise
    deadline = time.monotonic() + timeout
    while await count_pods(api, namespace):
        if time.monotonic() > deadline:
            raise TimeoutError(f"pods of namespace {namespace} are still there")
        await asyncio.sleep(0.2)
    try:
        await api.delete(f"/api/v1/namespaces/{namespace}")
    except ApiError as err:
        if err.status != 404:
            raise


_LAGGING_TAINTS = ("node.kubernetes.io/not-ready", "node.kubernetes.io/unreachable")


async def wait_nodes_settled(api: KubeApi, timeout: float = 180.0) -> int:
    """Wait until every kwok node is Ready *and* the node controller has lifted its
    not-ready taint (it lags behind Ready by seconds on a fresh cluster); returns the
    node count. A contender must not start while capacity is still appearing."""
    deadline = time.monotonic() + timeout
    while True:
        nodes = (await api.get("/api/v1/nodes", {"labelSelector": "type=kwok"}))["items"]
        waiting = [
            n for n in nodes
            if not any(c.get("type") == "Ready" and c.get("status") == "True"
                       for c in (n.get("status") or {}).get("conditions") or ())
            or any(t.get("key") in _LAGGING_TAINTS for t in (n.get("spec") or {}).get("taints")
                   or ())
        ]
        if not waiting:
            return len(nodes)
        if time.monotonic() > deadline:
            raise TimeoutError(f"{len(waiting)} of {len(nodes)} nodes are still not ready")
        await asyncio.sleep(0.5)


async def wait_nodes_quiet(api: KubeApi, quiet: float = 5.0, timeout: float = 180.0) -> float:
    """Wait until no Node has changed for ``quiet`` seconds (status heartbeats, labels and
    taints settle for about a minute after a cluster starts); returns the seconds waited.
    Whatever runs first must not pay for a cluster still busy with itself."""
    started = time.monotonic()
    page = await api.get("/api/v1/nodes", {"limit": "1"})
    version = str((page.get("metadata") or {}).get("resourceVersion", ""))
    last = time.monotonic()

    async def follow() -> None:
        nonlocal last, version
        while True:
            try:
                async for _, obj in api.watch("/api/v1/nodes", {"resourceVersion": version},
                                              int(timeout)):
                    version = str((obj.get("metadata") or {}).get("resourceVersion", version))
                    last = time.monotonic()
            except ApiError:
                page = await api.get("/api/v1/nodes", {"limit": "1"})
                version = str((page.get("metadata") or {}).get("resourceVersion", ""))
                last = time.monotonic()

    watcher = asyncio.create_task(follow())
    try:
        while time.monotonic() - last < quiet and time.monotonic() - started < timeout:
            await asyncio.sleep(0.5)
    finally:
        watcher.cancel()
        with contextlib.suppress(asyncio.CancelledError):
            await watcher
    return time.monotonic() - started
