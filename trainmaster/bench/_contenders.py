"""The four contenders, each a separate process started and stopped by the benchmark.

Clock: each contender's time runs from ``start()`` until the last pod is bound.

* kube-scheduler (Go) is spawned in ``start()``: its process start-up, informer sync
  and leader election (off, like every contender) are inside the measurement.
* trainmaster and bind-ceiling are Python: ``prepare()`` spawns them with
  ``--wait-for-stdin`` and waits for "ready" (interpreter and imports, about a second
  on a busy 2-core machine), then ``start()`` writes one line. Everything after the
  imports (kubeconfig, TLS, lease, list+watch, placement, binds) is measured.
"""

from __future__ import annotations

import asyncio
import contextlib
import os
import signal
import subprocess
import sys
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Protocol

import yaml

from trainmaster.bench._cluster import LEVELS

TRAINMASTER = "trainmaster"
KUBE_DEFAULT = "kube-scheduler-default"
KUBE_TUNED = "kube-scheduler-tuned"
BIND_CEILING = "bind-ceiling"
CONTENDERS = (TRAINMASTER, KUBE_DEFAULT, KUBE_TUNED, BIND_CEILING)

TRAINMASTER_SCHEDULER = "trainmaster-scheduler"
DEFAULT_SCHEDULER = "default-scheduler"


@dataclass(frozen=True)
class RunContext:
    kubeconfig: Path
    namespace: str
    workdir: Path
    bind_concurrency: int
    client_qps: float = 5000.0


class Contender(Protocol):
    name: str
    scheduler_name: str

    async def prepare(self, ctx: RunContext) -> None: ...

    async def start(self) -> None: ...

    async def stop(self) -> None: ...


def _free_port() -> int:
    import socket

    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


@dataclass
class _Process:
    """A child in its own process group, output to a log file; stopped for sure."""

    argv: list[str]
    log: Path
    stdin: bool = False
    proc: subprocess.Popen[bytes] | None = None
    _log_fh: Any = field(default=None, repr=False)

    def spawn(self) -> None:
        self.log.parent.mkdir(parents=True, exist_ok=True)
        self._log_fh = self.log.open("ab")
        self.proc = subprocess.Popen(
            self.argv,
            stdin=subprocess.PIPE if self.stdin else subprocess.DEVNULL,
            stdout=subprocess.PIPE if self.stdin else self._log_fh,
            stderr=self._log_fh,
            start_new_session=True,
        )

    async def wait_ready(self, timeout: float = 120.0) -> None:
        """Wait for the child's "ready" line on stdout."""
        proc = self.proc
        assert proc is not None and proc.stdout is not None
        stdout = proc.stdout
        line = await asyncio.wait_for(asyncio.to_thread(stdout.readline), timeout)
        if line.strip() != b"ready":
            raise RuntimeError(f"{self.argv[0]} did not start: {line!r}; see {self.log}")

    def go(self) -> None:
        assert self.proc is not None and self.proc.stdin is not None
        self.proc.stdin.write(b"go\n")
        self.proc.stdin.flush()

    async def stop(self, timeout: float = 15.0) -> None:
        proc = self.proc
        if proc is None:
            return
        for sig in (signal.SIGTERM, signal.SIGKILL):
            if proc.poll() is not None:
                break
            with contextlib.suppress(ProcessLookupError, PermissionError):
                os.killpg(proc.pid, sig)
            with contextlib.suppress(subprocess.TimeoutExpired):
                await asyncio.to_thread(proc.wait, timeout)
        with contextlib.suppress(ProcessLookupError, PermissionError):
            os.killpg(proc.pid, signal.SIGKILL)  # anything it forked
        for stream in (proc.stdin, proc.stdout):
            if stream is not None:
                with contextlib.suppress(OSError):
                    stream.close()
        if self._log_fh is not None:
            self._log_fh.close()
        self.proc = None


class Trainmaster:
    name = TRAINMASTER
    scheduler_name = TRAINMASTER_SCHEDULER

    def __init__(self) -> None:
        self._proc: _Process | None = None

    def config(self, ctx: RunContext) -> dict[str, Any]:
        """The bench stack's scheduler config (what its Deployment would mount)."""
        return {
            "schedulerName": self.scheduler_name,
            "namespace": ctx.namespace,
            "levels": list(LEVELS),
            "gangTimeoutSeconds": 300,
            "bindConcurrency": ctx.bind_concurrency,
            "clientQps": ctx.client_qps,
            "leaderElection": {"leaseName": "trainmaster-scheduler",
                               "leaseNamespace": ctx.namespace},
            "topologyPolicy": [{"maxNodes": 1, "domain": "node", "mode": "required"},
                               {"domain": "leaf", "mode": "preferred"}],
            "metricsPort": _free_port(),
        }

    async def prepare(self, ctx: RunContext) -> None:
        path = ctx.workdir / "trainmaster-scheduler.yaml"
        path.write_text(yaml.safe_dump(self.config(ctx), sort_keys=False))
        self._proc = _Process(
            [sys.executable, "-m", "trainmaster.scheduler.cli", "--config", str(path),
             "--kubeconfig", str(ctx.kubeconfig), "--identity", "bench", "--wait-for-stdin",
             "--log-level", os.environ.get("TM_BENCH_LOG_LEVEL", "WARNING")],
            ctx.workdir / "trainmaster-scheduler.log",
            stdin=True,
        )
        self._proc.spawn()
        await self._proc.wait_ready()

    async def start(self) -> None:
        assert self._proc is not None
        self._proc.go()

    async def stop(self) -> None:
        if self._proc is not None:
            await self._proc.stop()


class BindCeiling(Trainmaster):
    name = BIND_CEILING

    async def prepare(self, ctx: RunContext) -> None:
        self._proc = _Process(
            [sys.executable, "-m", "trainmaster.bench._ceiling", "--kubeconfig",
             str(ctx.kubeconfig), "--namespace", ctx.namespace, "--scheduler-name",
             self.scheduler_name, "--concurrency", str(ctx.bind_concurrency), "--qps",
             str(ctx.client_qps), "--wait-for-stdin"],
            ctx.workdir / "bind-ceiling.log",
            stdin=True,
        )
        self._proc.spawn()
        await self._proc.wait_ready()


class KubeScheduler:
    """The stock kube-scheduler binary. Default: its stock configuration (client QPS 50,
    burst 100, adaptive percentageOfNodesToScore). Tuned: QPS and burst 5000 and
    ``percentageOfNodesToScore`` at its floor (kube-scheduler still scores at least 100
    nodes), the cheapest setting it offers for this workload. Leader election is off
    for both, as for every contender."""

    scheduler_name = DEFAULT_SCHEDULER

    def __init__(self, tuned: bool) -> None:
        self.tuned = tuned
        self.name = KUBE_TUNED if tuned else KUBE_DEFAULT
        self._proc: _Process | None = None

    def config(self, ctx: RunContext) -> dict[str, Any]:
        conn: dict[str, Any] = {"kubeconfig": str(ctx.kubeconfig)}
        doc: dict[str, Any] = {
            "apiVersion": "kubescheduler.config.k8s.io/v1",
            "kind": "KubeSchedulerConfiguration",
            "clientConnection": conn,
            "leaderElection": {"leaderElect": False},
        }
        if self.tuned:
            conn.update(qps=5000, burst=5000)
            doc["percentageOfNodesToScore"] = 1
        return doc

    async def prepare(self, ctx: RunContext) -> None:
        from trainmaster.toolchain import tool_path

        path = ctx.workdir / f"{self.name}.yaml"
        path.write_text(yaml.safe_dump(self.config(ctx), sort_keys=False))
        self._proc = _Process(
            [str(tool_path("kube-scheduler")), f"--config={path}", "--secure-port=0",
             "--bind-address=127.0.0.1", "--v=1"],
            ctx.workdir / f"{self.name}.log",
        )

    async def start(self) -> None:
        assert self._proc is not None
        self._proc.spawn()

    async def stop(self) -> None:
        if self._proc is not None:
            await self._proc.stop()


def make(name: str) -> Contender:
    if name == TRAINMASTER:
        return Trainmaster()
    if name == BIND_CEILING:
        return BindCeiling()
    if name in (KUBE_DEFAULT, KUBE_TUNED):
        return KubeScheduler(tuned=name == KUBE_TUNED)
    raise ValueError(f"unknown scheduler {name!r}; choose from {', '.join(CONTENDERS)}")
