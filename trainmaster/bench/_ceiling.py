"""``bind-ceiling``: bind pods round-robin to nodes, with no decision at all.

It measures what this API server on this machine can take: the same client, the same
number of binds in flight and the same rate limit as trainmaster, only without
informers, placement or reports. Pods (sorted by name) go to nodes (sorted by name)
in turn; with identical nodes and pods that fill them at most exactly, no node is
overcommitted, but gangs are spread everywhere.

Run as ``python -m trainmaster.bench._ceiling`` so it is a separate process like every
other contender.
"""

from __future__ import annotations

import argparse
import asyncio
import sys
from pathlib import Path

from trainmaster.kubeclient import ApiError, Kube, node_path, pod_path


async def bind_all(api: Kube, namespace: str, scheduler: str, concurrency: int) -> int:
    # The same start as trainmaster's: lists and connection warm-up at once.
    node_list, pod_list, _ = await asyncio.gather(
        api.list(node_path(), "type=kwok"),
        api.list(pod_path(namespace)),
        api.warm(concurrency),
    )
    nodes = sorted(n["metadata"]["name"] for n in node_list)
    pods = sorted(
        (p for p in pod_list
         if not p["spec"].get("nodeName") and p["spec"].get("schedulerName") == scheduler),
        key=lambda p: p["metadata"]["name"],
    )
    gate = asyncio.Semaphore(concurrency)

    async def bind(i: int, pod: dict[str, object]) -> bool:
        meta = pod["metadata"]
        assert isinstance(meta, dict)
        body = {"apiVersion": "v1", "kind": "Binding",
                "metadata": {"name": meta["name"], "uid": meta["uid"]},
                "target": {"apiVersion": "v1", "kind": "Node", "name": nodes[i % len(nodes)]}}
        for attempt in range(5):
            try:
                async with gate:
                    await api.post(pod_path(namespace, meta["name"], "binding"), body)
                return True
            except ApiError as err:
                if not err.transient:
                    return False
                await asyncio.sleep(0.1 * 2**attempt)
        return False

    results = await asyncio.gather(*(bind(i, p) for i, p in enumerate(pods)))
    return sum(results)


async def _main(args: argparse.Namespace) -> int:
    if args.wait_for_stdin:
        print("ready", flush=True)
        await asyncio.get_running_loop().run_in_executor(None, sys.stdin.readline)
    api = await Kube.connect(args.kubeconfig, pool=args.concurrency + 8, qps=args.qps,
                                burst=max(int(args.qps), args.concurrency),
                             user_agent="trainmaster-bench")
    async with api:
        bound = await bind_all(api, args.namespace, args.scheduler_name, args.concurrency)
    print(f"bound {bound}", file=sys.stderr)
    return 0


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(prog="bind-ceiling")
    p.add_argument("--kubeconfig", type=Path, required=True)
    p.add_argument("--namespace", required=True)
    p.add_argument("--scheduler-name", default="trainmaster-scheduler")
    p.add_argument("--concurrency", type=int, default=64)
    p.add_argument("--qps", type=float, default=5000)
    p.add_argument("--wait-for-stdin", action="store_true")
    return asyncio.run(_main(p.parse_args(argv)))


if __name__ == "__main__":
    sys.exit(main())
