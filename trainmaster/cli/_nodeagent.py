"""`trainmaster node-agent nic`: report the node's InfiniBand/RoCE health as NICHealthy."""

from __future__ import annotations

import asyncio
import logging
import signal
from pathlib import Path
from typing import Annotated

import typer

from trainmaster.cli._app import ClusterOpt, ContextOpt, KubeconfigOpt, app, say_target
from trainmaster.errors import UsageError

agent_app = typer.Typer(help="Agents that run on every GPU node (a DaemonSet).",
                        no_args_is_help=True)
app.add_typer(agent_app, name="node-agent")



@agent_app.command("nic")
def nic(
    node: Annotated[str, typer.Option("--node", help="This node's name (the DaemonSet passes "
                                      "spec.nodeName).", envvar="NODE_NAME")] = "",
    sysfs: Annotated[Path, typer.Option("--sysfs", help="Where the host's /sys is mounted.")
                     ] = Path("/sys"),
    devices: Annotated[str, typer.Option("--devices", help="RDMA devices the node must have, "
                                         "comma-separated (e.g. mlx5_0,mlx5_1).")] = "",
    netdevs: Annotated[str, typer.Option("--netdevs", help="Judge these network interfaces "
                                         "(operstate, carrier under /sys/class/net) instead "
                                         "of RDMA ports, comma-separated.")] = "",
    interval: Annotated[float, typer.Option("--interval", help="Seconds between looks at "
                                            "the ports (sysfs reads only).")] = 5.0,
    heartbeat: Annotated[float, typer.Option("--heartbeat", help="Seconds after which an "
                                             "unchanged verdict is written again; a "
                                             "changed one is written at once.")] = 30.0,
    once: Annotated[bool, typer.Option("--once", help="Look and report once, then exit.")
                    ] = False,
    metrics_address: Annotated[str, typer.Option(
        "--metrics-address", help="Listen address of /metrics: loopback on a host; the "
        "pod's IP in a cluster.")] = "127.0.0.1",
    metrics_port: Annotated[int, typer.Option(
        "--metrics-port", help="Port of /metrics (0: off).")] = 0,
    kubeconfig: KubeconfigOpt = None,
    context: ContextOpt = None,
    cluster_name: ClusterOpt = None,
) -> None:
    """Read /sys/class/infiniband/*/ports/* (or the --netdevs; on a node without RDMA
    devices, the interfaces its annotation trainmaster.io/nic-netdevs names) and set the
    node condition NICHealthy; with --metrics-port, serve what it saw on /metrics."""
    from trainmaster.kubeclient import Kube
    from trainmaster.nodeagent import NicAgent, NicAgentConfig, NicMetrics

    if not node:
        raise UsageError("--node (or $NODE_NAME) is required: the node to report on")
    if interval <= 0:
        raise UsageError("--interval must be > 0 seconds")
    if heartbeat <= 0:
        raise UsageError("--heartbeat must be > 0 seconds")
    if devices and netdevs:
        raise UsageError("--devices and --netdevs exclude each other: RDMA ports, or "
                         "plain interfaces")
    say_target(kubeconfig, "node-agent nic")
    config = NicAgentConfig(node=node, sysfs=sysfs, interval=interval, heartbeat=heartbeat,
                            kubeconfig=kubeconfig,
                            devices=tuple(d for d in devices.split(",") if d),
                            netdevs=tuple(d for d in netdevs.split(",") if d))
    logging.basicConfig(level=logging.INFO,
                        format="%(asctime)s %(levelname)s %(name)s: %(message)s")

    metrics = NicMetrics(node)
    if metrics_port and not once:
        bound = metrics.serve(metrics_address, metrics_port)
        logging.getLogger(__name__).info("metrics on http://%s:%d/metrics",
                                         metrics_address, bound)

    async def main() -> None:
        kube = await Kube.connect(config.kubeconfig, user_agent="trainmaster-nic-agent")
        try:
            agent = NicAgent(config, kube, metrics)
            if once:
                verdict = await agent.once()
                typer.echo(f"{node}: NICHealthy={verdict.healthy} {verdict.reason}: "
                           f"{verdict.message}")
                return
            stop = asyncio.Event()
            loop = asyncio.get_running_loop()
            for sig in (signal.SIGTERM, signal.SIGINT):
                loop.add_signal_handler(sig, stop.set)
            await agent.run(stop)
        finally:
            await kube.close()
            metrics.stop()

    asyncio.run(main())
