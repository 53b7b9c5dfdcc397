"""One scheduler replica: metrics server, cache, leader election, the runtime, signals.

Order matters for fast failover: the cache is listed and watched *before* the lease is
won, so a standby that takes over already knows the cluster and schedules at once.
Only the leader runs cycles and binds.

Exit codes: 0 after SIGTERM/SIGINT (in-flight binds finished, lease released so the
standby takes over at once); 1 when the lease was lost (stop immediately, another
replica may be binding; the Deployment restarts this one as a standby).
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import signal
import sys
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Protocol

from trainmaster.kubeclient import Kube
from trainmaster.tasks import cancel_all

from . import heap
from .config import SchedulerConfig
from .events import default_identity
from .leader import LeaderElector
from .loop import SchedulerRuntime
from .metrics import SchedulerMetrics

log = logging.getLogger("trainmaster.scheduler")

EXIT_OK = 0
EXIT_LOST_LEASE = 1


@dataclass(frozen=True, slots=True)
class ServiceOptions:
    kubeconfig: Path | None = None
    identity: str | None = None
    wait_for_stdin: bool = False
    """Start only after a line on stdin: benchmarks exclude interpreter start-up."""


async def _wait_stdin() -> None:
    loop = asyncio.get_running_loop()
    await loop.run_in_executor(None, sys.stdin.readline)


async def serve(config: SchedulerConfig, options: ServiceOptions,
                stop: asyncio.Event | None = None) -> int:
    stop = stop or asyncio.Event()
    loop = asyncio.get_running_loop()
    for sig in (signal.SIGTERM, signal.SIGINT):
        with contextlib.suppress(NotImplementedError, RuntimeError, ValueError):
            loop.add_signal_handler(sig, stop.set)
    metrics = SchedulerMetrics()
    heap.log_slow_collections()
    if config.metrics_port:
        port = metrics.serve(config.metrics_address, config.metrics_port)
        log.info("metrics on http://%s:%d/metrics", config.metrics_address, port)
    try:
        if options.wait_for_stdin:
            print("ready", flush=True)  # imports done: the parent may start the clock
            await _wait_stdin()
            log.debug("started")
        return await _run(config, options, metrics, stop)
    finally:
        metrics.stop()


class _Stoppable(Protocol):
    def stop_starting(self) -> None: ...

    async def idle(self) -> None: ...

    async def shutdown(self, drain: float = 10.0) -> None: ...


class _Releasable(Protocol):
    async def release(self) -> None: ...


async def hand_over(runtime: _Stoppable, elector: _Releasable | None,
                    drain: float = 10.0) -> None:
    """A clean stop: send no gang's binds that have not begun, release the Lease as
    soon as no bind is in flight, *then* flush.

    Why this order: the standby may bind once the Lease is free, and only binds must
    never overlap. Flushing the Events and status reports of the last binds (up to 2 s
    after a burst) is no reason to keep it waiting. If the binds do not finish within
    ``drain``, they are cancelled at once (not after a second ``drain``: the leader
    stopped renewing at the signal, and a standby may take the expired lease 15 s after
    the last renewal while late binds still run), and the Lease released after.
    """
    runtime.stop_starting()  # a planned burst would hold the Lease for its whole length
    if elector is not None:
        started = time.monotonic()
        try:
            async with asyncio.timeout(drain):
                await runtime.idle()
        except TimeoutError:
            drain = 0.0  # waited already: shutdown() cancels the late binds now
        else:
            idle = time.monotonic() - started
            await elector.release()
            elector = None
            log.info("stopping: no bind in flight after %.2fs, lease released after %.2fs",
                     idle, time.monotonic() - started)
    await runtime.shutdown(drain)
    if elector is not None:
        await elector.release()


async def _run(config: SchedulerConfig, options: ServiceOptions, metrics: SchedulerMetrics,
               stop: asyncio.Event) -> int:
    identity = options.identity or default_identity()
    api = await Kube.connect(
        options.kubeconfig, pool=config.bind_concurrency + 8, qps=config.client_qps,
        burst=config.burst, user_agent="trainmaster-scheduler",
    )
    runtime = SchedulerRuntime(api, config, metrics=metrics, identity=identity)
    election = config.leader_election
    elector = LeaderElector(api, election, identity) if election.enabled else None
    acquired = asyncio.Event()

    async def lead() -> None:
        """Campaign, then renew until the lease is lost. Renewal starts the moment the
        lease is won, even while the cache is still syncing: a sync longer than the
        lease duration (a loaded machine, a large cluster) must not let it expire."""
        if elector is not None:
            await elector.acquire()
        acquired.set()
        await (elector.hold() if elector is not None else asyncio.Event().wait())

    async def sync() -> None:
        # The cache lives as long as the process: no collection walks it (heap.py).
        with heap.collector_paused():
            await runtime.start()

    # Warm the cache and campaign for the lease at the same time.
    leading = asyncio.ensure_future(lead())
    stopped = asyncio.ensure_future(stop.wait())
    try:
        for step in (sync(), acquired.wait()):
            work = asyncio.ensure_future(step)
            await asyncio.wait({work, stopped, leading}, return_when=asyncio.FIRST_COMPLETED)
            if work.done():
                work.result()  # a failed start or campaign ends the process, loudly
            else:
                await cancel_all([work])
            if leading.done():  # won, then lost while still syncing
                leading.result()
                return await _step_down(runtime, identity)
            if stop.is_set():
                await cancel_all([leading])
                await runtime.shutdown()
                if elector is not None:
                    await elector.release()  # won while syncing: hand it on at once
                return EXIT_OK
        metrics.leader.set(1)
        heap.freeze()  # what the standby gathered while it waited: out of the collector
        if elector is not None:  # the old leader's last binds may still be on the way
            await runtime.catch_up()
        await runtime.restore_history()  # fair-share order as the last leader had it
        log.info("%s: scheduling pods with schedulerName %s", identity, config.scheduler_name)
        running = asyncio.ensure_future(runtime.run(stop))
        await asyncio.wait({running, leading}, return_when=asyncio.FIRST_COMPLETED)
        if leading.done() and not stop.is_set():
            metrics.leader.set(0)
            await cancel_all([running])
            leading.result()
            return await _step_down(runtime, identity)
        await cancel_all([leading])  # hold() awaits wait_for: cancel until it ends
        await running
        await hand_over(runtime, elector)
        metrics.leader.set(0)
        return EXIT_OK
    finally:
        await cancel_all([leading, stopped])
        await api.close()


async def _step_down(runtime: SchedulerRuntime, identity: str) -> int:
    """The lease was lost: stop now (another replica may be binding) and exit for the
    Deployment to restart this one as a standby. Bounded: nothing may keep it alive."""
    await runtime.abort()
    log.error("%s: exiting (code %d) to campaign again as a standby", identity,
              EXIT_LOST_LEASE)
    return EXIT_LOST_LEASE
