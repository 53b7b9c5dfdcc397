"""The contenders, each a separate process started and stopped by the benchmark.

Clock: the same point for every contender, its **process start**. ``prepare()`` only
writes configuration files; ``start()`` spawns the process, and the clock runs from just
before the spawn until the last pod is bound. So the start-up of each (for the Python
ones the interpreter and imports, about a second on a busy 2-core machine; for
kube-scheduler the Go runtime), its kubeconfig, TLS, list+watch, any decisions and every
bind are inside the measurement. Leader election is off for every kube-scheduler, and
trainmaster takes its Lease alone.

* ``trainmaster``: trainmaster-scheduler with the bench stack's config.
* ``kube-scheduler-nodecisions``: the stock kube-scheduler binary with every filter and
  score plugin disabled (only the queue sort and the default binder left) at client
  QPS and burst 5000: a Go client that binds as fast as the API server takes it, making
  no decisions. It is the API server's bind limit on this machine, and the denominator
  of "% of the limit".
* ``kube-scheduler-default``: its stock configuration (QPS 50, burst 100).
* ``kube-scheduler-tuned``: QPS and burst 5000, ``percentageOfNodesToScore`` at its floor.
* ``kube-scheduler-tuned-affinity``: QPS and burst 5000, every feasible node scored
  (``percentageOfNodesToScore: 100``), and its pods carry what a kube-scheduler user
  would write to keep a gang together: a preferred inter-pod affinity on the leaf label
  among the gang's members (weight 100).
* ``bind-ceiling``: a same-client baseline, not the API server's limit: trainmaster's
  own Python client binding round-robin with no decisions (see ``_ceiling``).
* ``trainmaster-upstream`` (only when named with ``--only``): trainmaster-scheduler as
  ``trainmaster``, on the same gangs expressed through the upstream gang API
  (``scheduling.k8s.io/v1beta1`` PodGroups, the pods' ``spec.schedulingGroup``).
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
from trainmaster.cluster import free_port

TRAINMASTER = "trainmaster"
KUBE_NODECISIONS = "kube-scheduler-nodecisions"
KUBE_DEFAULT = "kube-scheduler-default"
KUBE_TUNED = "kube-scheduler-tuned"
KUBE_TUNED_AFFINITY = "kube-scheduler-tuned-affinity"
BIND_CEILING = "bind-ceiling"
CONTENDERS = (TRAINMASTER, KUBE_NODECISIONS, KUBE_DEFAULT, KUBE_TUNED, KUBE_TUNED_AFFINITY,
              BIND_CEILING)
TRAINMASTER_UPSTREAM = "trainmaster-upstream"
OPTIONAL_CONTENDERS = (TRAINMASTER_UPSTREAM,)
"""Run only when ``--only`` names them."""
LIMIT = KUBE_NODECISIONS
"""The contender whose time is 100% of the limit."""
KUBE_VARIANTS = {KUBE_NODECISIONS: "nodecisions", KUBE_DEFAULT: "default",
                 KUBE_TUNED: "tuned", KUBE_TUNED_AFFINITY: "tuned-affinity"}

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
    pod_affinity: bool
    """Its pods carry a preferred inter-pod affinity among the gang's members."""
    upstream_groups: bool
    """Its gangs are upstream PodGroups its pods name in ``spec.schedulingGroup``."""

    async def prepare(self, ctx: RunContext) -> None: ...

    async def start(self) -> None: ...

    async def stop(self) -> None: ...

    def memory(self) -> Memory | None:
        """Its process's resident memory now and at its peak (None if not running)."""
        ...


@dataclass(frozen=True)
class Memory:
    rss_mb: float
    """``VmRSS``: resident now."""
    peak_rss_mb: float
    """``VmHWM``: the most it was resident at any time."""


def process_memory(pid: int) -> Memory | None:
    """From /proc/<pid>/status (kB); None if the process is gone."""
    try:
        text = Path(f"/proc/{pid}/status").read_text()
    except OSError:
        return None
    fields = {}
    for line in text.splitlines():
        key, _, value = line.partition(":")
        if key in ("VmRSS", "VmHWM"):
            fields[key] = int(value.split()[0]) / 1024
    if len(fields) != 2:  # a zombie has no memory lines
        return None
    return Memory(round(fields["VmRSS"], 1), round(fields["VmHWM"], 1))


@dataclass
class _Process:
    """A child in its own process group, output to a log file; stopped for sure."""

    argv: list[str]
    log: Path
    env: dict[str, str] | None = None
    """The child's whole environment (None: this process's)."""
    proc: subprocess.Popen[bytes] | None = None
    _log_fh: Any = field(default=None, repr=False)

    def spawn(self) -> None:
        self.log.parent.mkdir(parents=True, exist_ok=True)
        self._log_fh = self.log.open("ab")
        self.proc = subprocess.Popen(
            self.argv,
            stdin=subprocess.DEVNULL,
            stdout=self._log_fh,
            stderr=self._log_fh,
            env=self.env,
            start_new_session=True,
        )

    @property
    def pid(self) -> int | None:
        """The child's process id while it runs."""
        proc = self.proc
        return None if proc is None or proc.poll() is not None else proc.pid

    def memory(self) -> Memory | None:
        proc = self.proc
        if proc is None or proc.poll() is not None:
            return None
        return process_memory(proc.pid)

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
        if self._log_fh is not None:
            self._log_fh.close()
        self.proc = None


class Trainmaster:
    name = TRAINMASTER
    scheduler_name = TRAINMASTER_SCHEDULER
    pod_affinity = False
    upstream_groups = False

    def __init__(self, tree: Path | None = None) -> None:
        self._proc: _Process | None = None
        self.tree = tree
        """Run this checkout's scheduler (``--also-tree``, see ``_trees``) instead."""
        if tree is not None:
            self.name = f"{TRAINMASTER}@{tree}"

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
            "metricsPort": free_port(),
        }

    async def prepare(self, ctx: RunContext) -> None:
        from trainmaster.bench._trees import python_argv, tree_env

        stem = "trainmaster-scheduler" if self.tree is None else "trainmaster-scheduler-tree"
        if self.upstream_groups:  # its own config and log, apart from trainmaster's
            stem += "-upstream"
        path = ctx.workdir / f"{stem}.yaml"
        path.write_text(yaml.safe_dump(self.config(ctx), sort_keys=False))
        python = [sys.executable] if self.tree is None else python_argv()
        self._proc = _Process(
            [*python, "-m", "trainmaster.scheduler.cli", "--config", str(path),
             "--kubeconfig", str(ctx.kubeconfig), "--identity", "bench",
             "--log-level", os.environ.get("TM_BENCH_LOG_LEVEL", "WARNING")],
            ctx.workdir / f"{stem}.log",
            env=None if self.tree is None else tree_env(self.tree),
        )

    async def start(self) -> None:
        assert self._proc is not None
        self._proc.spawn()

    async def stop(self) -> None:
        if self._proc is not None:
            await self._proc.stop()

    def memory(self) -> Memory | None:
        return None if self._proc is None else self._proc.memory()

    @property
    def pid(self) -> int | None:
        """Its process id while it runs."""
        return None if self._proc is None else self._proc.pid


class TrainmasterUpstream(Trainmaster):
    name = TRAINMASTER_UPSTREAM
    upstream_groups = True


class BindCeiling(Trainmaster):
    name = BIND_CEILING

    async def prepare(self, ctx: RunContext) -> None:
        self._proc = _Process(
            [sys.executable, "-m", "trainmaster.bench._ceiling", "--kubeconfig",
             str(ctx.kubeconfig), "--namespace", ctx.namespace, "--scheduler-name",
             self.scheduler_name, "--concurrency", str(ctx.bind_concurrency), "--qps",
             str(ctx.client_qps)],
            ctx.workdir / "bind-ceiling.log",
        )


class KubeScheduler:
    """The stock kube-scheduler binary in one of ``KUBE_VARIANTS`` (see the module doc)."""

    scheduler_name = DEFAULT_SCHEDULER
    upstream_groups = False

    def __init__(self, variant: str) -> None:
        if variant not in KUBE_VARIANTS.values():
            raise ValueError(f"unknown kube-scheduler variant {variant!r}")
        self.variant = variant
        self.name = f"kube-scheduler-{variant}"
        self.pod_affinity = variant == "tuned-affinity"
        self._proc: _Process | None = None

    @property
    def tuned(self) -> bool:
        return self.variant != "default"

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
            # At 1% kube-scheduler scores only the first 100 feasible nodes it finds:
            # fast, but blind to where a gang's peers are. The affinity variant is its
            # fair chance at placement, so it scores every feasible node.
            doc["percentageOfNodesToScore"] = 100 if self.pod_affinity else 1
        if self.variant == "nodecisions":
            # Everything off, then only what a profile cannot run without: one queue
            # sort and one binder. No filter, no score: any node, bound at once.
            doc["profiles"] = [{
                "schedulerName": self.scheduler_name,
                "plugins": {
                    "multiPoint": {"disabled": [{"name": "*"}]},
                    "queueSort": {"enabled": [{"name": "PrioritySort"}]},
                    "bind": {"enabled": [{"name": "DefaultBinder"}]},
                },
            }]
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

    def memory(self) -> Memory | None:
        return None if self._proc is None else self._proc.memory()


def make(name: str) -> Contender:
    if name == TRAINMASTER:
        return Trainmaster()
    if name == BIND_CEILING:
        return BindCeiling()
    if name == TRAINMASTER_UPSTREAM:
        return TrainmasterUpstream()
    if name in KUBE_VARIANTS:
        return KubeScheduler(KUBE_VARIANTS[name])
    raise ValueError(f"unknown scheduler {name!r}; choose from "
                     f"{', '.join(CONTENDERS + OPTIONAL_CONTENDERS)}")
