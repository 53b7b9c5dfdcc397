"""The few API chores of the benchmark: CRD, namespaces, bulk create and delete.

Creation is concurrent (a bounded number of requests in flight) so that setting up a
thousand pending pods takes seconds, and every contender starts from the same state.
"""

from __future__ import annotations

import asyncio
import contextlib
import time
from collections.abc import Callable, Iterable
from typing import Any

from trainmaster.kubeclient import (
    ApiError,
    Kube,
    crd_path,
    namespace_path,
    node_path,
    pod_path,
    podgroup_path,
)
from trainmaster.polling import wait_until_async

PODGROUP_CRD = "podgroups.scheduling.x-k8s.io"


def established(crd: dict[str, Any]) -> bool:
    """A CRD's Established condition is True: its kind is served."""
    conditions = (crd.get("status") or {}).get("conditions") or []
    return any(c.get("type") == "Established" and c.get("status") == "True" for c in conditions)


async def ensure_podgroup_crd(api: Kube, timeout: float = 60.0) -> None:
    """Install the PodGroup CRD if absent and wait until it is served."""
    from trainmaster.objects import podgroup_crd

    try:
        await api.get(crd_path(PODGROUP_CRD))
    except ApiError as err:
        if not err.not_found:
            raise
        try:
            await api.post(crd_path(), podgroup_crd())
        except ApiError as create_err:
            if not create_err.conflict:
                raise

    async def served() -> bool:
        if not established(await api.get(crd_path(PODGROUP_CRD))):
            return False
        try:
            await api.get(podgroup_path(), {"limit": "1"})
        except ApiError:
            return False
        return True

    await wait_until_async(served, "the PodGroup CRD to be established", timeout, 0.2)


async def create_namespace(api: Kube, name: str, labels: dict[str, str] | None = None) -> None:
    await api.post(namespace_path(),
                   {"apiVersion": "v1", "kind": "Namespace",
                    "metadata": {"name": name, "labels": labels or {}}})


async def create_all(api: Kube, objects: Iterable[tuple[str, dict[str, Any]]],
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


async def count_pods(api: Kube, namespace: str) -> int:
    return len(await api.list(pod_path(namespace)))


async def delete_namespace(api: Kube, namespace: str, timeout: float = 180.0) -> None:
    """Delete the pods at once (grace period 0), then the namespace; wait until the pods
    are gone and then the namespace itself (its controller's clean-up of Events, PodGroups
    and the Lease loads the API server), so the next contender finds the nodes empty and
    the API server quiet."""
    try:
        await api.request("DELETE", pod_path(namespace), params={"gracePeriodSeconds": "0"},
                          timeout=timeout)
    except ApiError as err:
        # On a loaded machine the API server may answer 504 while it goes on deleting;
        # whatever is left goes with the namespace (its pods have a 0 s grace period).
        if not err.not_found and not err.transient:
            raise

    async def no_pods() -> bool:
        return not await count_pods(api, namespace)

    await api.delete(namespace_path(namespace), missing_ok=True)
    await wait_until_async(no_pods, f"the pods of namespace {namespace} to go", timeout, 0.2)

    async def gone() -> bool:
        try:
            await api.get(namespace_path(namespace))
        except ApiError as err:
            if err.not_found:
                return True
            raise
        return False

    await wait_until_async(gone, f"namespace {namespace} to be gone", timeout, 0.5)


_LAGGING_TAINTS = ("node.kubernetes.io/not-ready", "node.kubernetes.io/unreachable")


def _settled(node: dict[str, Any]) -> bool:
    ready = any(c.get("type") == "Ready" and c.get("status") == "True"
                for c in (node.get("status") or {}).get("conditions") or ())
    lagging = any(t.get("key") in _LAGGING_TAINTS
                  for t in (node.get("spec") or {}).get("taints") or ())
    return ready and not lagging


async def wait_nodes_settled(api: Kube, timeout: float = 180.0) -> int:
    """Wait until every kwok node is Ready *and* the node controller has lifted its
    not-ready taint (it lags behind Ready by seconds on a fresh cluster); returns the
    node count. A contender must not start while capacity is still appearing."""

    async def settled() -> tuple[int] | None:  # a tuple: zero nodes is an answer too
        # From the watch cache (resourceVersion=0), with room: listing 5000 nodes from
        # etcd took over the client's 30 s on a loaded 2-core machine.
        try:
            answer = await api.request("GET", node_path(), limited=False, timeout=180,
                                       params={"labelSelector": "type=kwok",
                                               "resourceVersion": "0"})
        except ApiError as err:
            if err.status != 0 and not err.transient:
                raise
            return None  # cut off under load (the server's own 60 s limit): poll again
        nodes = answer.get("items") or []
        return None if any(not _settled(n) for n in nodes) else (len(nodes),)

    count, = await wait_until_async(settled, "every kwok node to be Ready, untainted",
                                    timeout, 2.0)
    return count


async def wait_nodes_quiet(api: Kube, quiet: float = 5.0, timeout: float = 180.0) -> float:
    """Wait until no Node has changed for ``quiet`` seconds (status heartbeats, labels and
    taints settle for about a minute after a cluster starts); returns the seconds waited.
    Whatever runs first must not pay for a cluster still busy with itself."""
    started = time.monotonic()
    page = await api.get(node_path(), {"limit": "1"})
    version = str((page.get("metadata") or {}).get("resourceVersion", ""))
    last = time.monotonic()

    async def follow() -> None:
        nonlocal last, version
        while True:
            try:
                async for _, obj in api.watch(node_path(), {"resourceVersion": version},
                                              int(timeout)):
                    version = str((obj.get("metadata") or {}).get("resourceVersion", version))
                    last = time.monotonic()
            except ApiError:
                page = await api.get(node_path(), {"limit": "1"})
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


async def settled_kwok_nodes(api: Kube, limit: float, report: Callable[[str], None]
                             ) -> list[dict[str, Any]]:
    """The kwok nodes once every node is Ready, untainted and quiet (within ``limit``
    seconds each), with the PodGroup CRD in place: where every live bench starts."""
    report("waiting for every node to be Ready and untainted, then quiet")
    await wait_nodes_settled(api, limit)
    waited = await wait_nodes_quiet(api, timeout=limit)
    report(f"nodes quiet after {waited:.0f}s")
    await ensure_podgroup_crd(api)
    return await api.list(node_path(), "type=kwok")
