"""Register the simulated nodes concurrently and wait until kwok has made them Ready."""

from __future__ import annotations

import asyncio
from pathlib import Path
from typing import Any

from trainmaster.cluster._processes import ClusterError
from trainmaster.kubeclient import ApiError, Kube, node_path
from trainmaster.polling import WaitTimeout, wait_until_async


async def _register(kubeconfig: Path, nodes: list[dict[str, Any]], concurrency: int) -> None:
    async with await Kube.connect(kubeconfig, pool=concurrency) as kube:
        gate = asyncio.Semaphore(concurrency)

        async def create(node: dict[str, Any]) -> None:
            async with gate:
                try:
                    await kube.post(node_path(), node)
                except ApiError as exc:
                    if not exc.conflict:  # already there (a retried up) is fine
                        raise ClusterError(
                            f"creating node {node['metadata']['name']} failed: {exc}"
                        ) from None

        await asyncio.gather(*(create(n) for n in nodes))


def register_nodes(kubeconfig: Path, nodes: list[dict[str, Any]], concurrency: int = 64) -> None:
    asyncio.run(_register(kubeconfig, nodes, concurrency))


def _is_ready(node: dict[str, Any]) -> bool:
    conditions = (node.get("status") or {}).get("conditions") or []
    return any(c.get("type") == "Ready" and c.get("status") == "True" for c in conditions)


async def _wait_ready(kubeconfig: Path, names: set[str], timeout: float) -> None:
    async with await Kube.connect(kubeconfig) as kube:
        ready: set[str] = set()

        async def all_ready() -> bool:
            nonlocal ready
            listing = await kube.list(node_path(), "type=kwok")
            ready = {n["metadata"]["name"] for n in listing if _is_ready(n)}
            return names <= ready

        try:
            await wait_until_async(all_ready, "the nodes to be Ready", timeout)
        except WaitTimeout:
            missing = sorted(names - ready)
            raise ClusterError(
                f"{len(missing)} of {len(names)} nodes are not Ready after "
                f"{timeout:.0f}s (e.g. {', '.join(missing[:3])}); see kwok.log"
            ) from None


def wait_nodes_ready(kubeconfig: Path, names: set[str], timeout: float = 120) -> None:
    asyncio.run(_wait_ready(kubeconfig, names, timeout))
