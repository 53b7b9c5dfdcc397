"""Register the simulated nodes concurrently and wait until kwok has made them Ready."""

from __future__ import annotations

import asyncio
import time
from pathlib import Path
from typing import Any

from kubernetes_asyncio import client
from kubernetes_asyncio.client.exceptions import ApiException

from trainmaster.cluster._processes import ClusterError
from trainmaster.kube import async_client


async def _register(kubeconfig: Path, nodes: list[dict[str, Any]], concurrency: int) -> None:
    api_client = await async_client(kubeconfig, pool=concurrency)
    async with api_client:
        core = client.CoreV1Api(api_client)
        gate = asyncio.Semaphore(concurrency)

        async def create(node: dict[str, Any]) -> None:
            async with gate:
                try:
                    await core.create_node(node)
                except ApiException as exc:
                    if exc.status != 409:  # already there (a retried up) is fine
                        raise ClusterError(
                            f"creating node {node['metadata']['name']} failed: "
                            f"{exc.status} {exc.reason}"
                        ) from None

        await asyncio.gather(*(create(n) for n in nodes))


def register_nodes(kubeconfig: Path, nodes: list[dict[str, Any]], concurrency: int = 64) -> None:
    asyncio.run(_register(kubeconfig, nodes, concurrency))


def _is_ready(node: Any) -> bool:
    return any(c.type == "Ready" and c.status == "True" for c in (node.status.conditions or []))


async def _wait_ready(kubeconfig: Path, names: set[str], timeout: float) -> None:
    api_client = await async_client(kubeconfig)
    async with api_client:
        core = client.CoreV1Api(api_client)
        deadline = time.monotonic() + timeout
        ready: set[str] = set()
        while time.monotonic() < deadline:
            listing = await core.list_node(label_selector="type=kwok")
            ready = {n.metadata.name for n in listing.items if _is_ready(n)}
            if names <= ready:
                return
            await asyncio.sleep(0.25)
        missing = sorted(names - ready)
        raise ClusterError(
            f"{len(missing)} of {len(names)} nodes are not Ready after "
            f"{timeout:.0f}s (e.g. {', '.join(missing[:3])}); see kwok.log"
        )


def wait_nodes_ready(kubeconfig: Path, names: set[str], timeout: float = 120) -> None:
    asyncio.run(_wait_ready(kubeconfig, names, timeout))
