"""Register the simulated nodes concurrently and wait until kwok has made them Ready."""

from __future__ import annotations

import asyncio
import time
from collections.abc import Callable
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


async def _wait_ready(
    kubeconfig: Path, names: set[str], timeout: float, every: float,
    report: Callable[[str], None],
) -> None:
    async with await Kube.connect(kubeconfig) as kube:
        ready: set[str] = set()
        said = time.monotonic()

        async def all_ready() -> bool:
            nonlocal ready, said
            # resourceVersion=0: served from the API server's watch cache, not etcd.
            # A long request timeout: at 5,000 nodes on 2 shared cores (load 20-30) this
            # list took past the client's default 30 s and ended `cluster up`.
            try:
                answer = await kube.request("GET", node_path(), limited=False, timeout=180,
                                            params={"labelSelector": "type=kwok",
                                                    "resourceVersion": "0"})
            except ApiError as exc:
                if exc.status != 0 and not exc.transient:
                    raise
                # No answer (the API server cut the list at its own 60 s limit): the
                # nodes are still coming; ask again on the next poll.
                return False
            listing = answer.get("items") or []
            ready = {n["metadata"]["name"] for n in listing if _is_ready(n)}
            if time.monotonic() - said >= 10:
                said = time.monotonic()
                report(f"{len(names & ready)}/{len(names)} nodes Ready")
            return names <= ready

        try:
            await wait_until_async(all_ready, "the nodes to be Ready", timeout, every=every)
        except WaitTimeout:
            missing = sorted(names - ready)
            raise ClusterError(
                f"{len(missing)} of {len(names)} nodes are not Ready after "
                f"{timeout:.0f}s (e.g. {', '.join(missing[:3])}); see kwok.log"
            ) from None


def _silent(_: str) -> None:
    pass


def wait_nodes_ready(
    kubeconfig: Path, names: set[str], timeout: float = 120, every: float = 0.25,
    report: Callable[[str], None] = _silent,
) -> None:
    """Wait until every node in ``names`` is Ready; ``report`` hears "N/M nodes Ready"
    every ten seconds."""
    asyncio.run(_wait_ready(kubeconfig, names, timeout, every, report))
