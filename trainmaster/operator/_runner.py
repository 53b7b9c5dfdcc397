"""Running the operator: in the foreground (`trainmaster operator run`), or in a background
thread (tests, the recovery benchmark).

Leadership: kopf runs *standalone* (no peering CRDs to install). One operator per cluster
spec is the design: the Deployment has replicas 1 and the Recreate strategy, so a new pod
starts only after the old one is gone. Should two ever overlap, every restart decision is a
status write guarded by the TrainingJob's resourceVersion, so only one of them can count a
given failure; the loser re-reads and finds the restart already made.
"""

from __future__ import annotations

import asyncio
import io
import logging
import sys
import threading
import traceback

import kopf

from trainmaster.api import KOPF_ANNOTATION_PREFIX
from trainmaster.operator._handlers import build_registry
from trainmaster.operator._runtime import OperatorConfig

_PATTERN_CHARS = frozenset("*?[]!,")
"""What makes a kopf namespace argument a pattern rather than one namespace's name."""


def exact_namespaces(config: OperatorConfig) -> bool:
    """Whether the operator serves named namespaces only (no glob, not cluster-wide)."""
    return not config.clusterwide and not any(
        _PATTERN_CHARS & set(ns) for ns in config.namespaces)


def kopf_settings(in_thread: bool = False, scan: bool = True) -> kopf.OperatorSettings:
    settings = kopf.OperatorSettings()
    # Scanning lists and watches Namespaces (to match globs) and CRDs. With named
    # namespaces there is nothing to match, and the generated RBAC grants no Namespace
    # access: kopf would retry a forbidden cluster-wide list 9 times (about a minute of
    # ERROR lines) before serving. The CRDs are applied before the operator starts.
    settings.scanning.disabled = not scan
    # We post our own Events (restarts, fencing); kopf's per-handler chatter would bury them.
    settings.posting.enabled = False
    # Keep kopf's bookkeeping in our annotations, out of the status that people read.
    settings.persistence.progress_storage = kopf.AnnotationsProgressStorage(
        prefix=KOPF_ANNOTATION_PREFIX)
    settings.persistence.diffbase_storage = kopf.AnnotationsDiffBaseStorage(
        prefix=KOPF_ANNOTATION_PREFIX, key="last-handled-configuration"
    )
    # Reconnect watches well before an idle load balancer would cut them.
    settings.watching.server_timeout = 300
    settings.watching.client_timeout = 330
    if in_thread:
        # kopf's last resort on an unclean exit SIGKILLs its thread, i.e. the whole process:
        # never in a test run or the benchmark.
        settings.process.ultimate_exiting_timeout = None
    return settings


async def operate(
    config: OperatorConfig,
    stop_flag: threading.Event | asyncio.Event | None = None,
    ready_flag: threading.Event | asyncio.Event | None = None,
    in_thread: bool = False,
) -> None:
    await kopf.operator(
        registry=build_registry(config),
        settings=kopf_settings(in_thread, scan=not exact_namespaces(config)),
        standalone=True,
        clusterwide=config.clusterwide,
        namespaces=list(config.namespaces),
        liveness_endpoint=config.liveness,
        stop_flag=stop_flag,
        ready_flag=ready_flag,
        memo=kopf.Memo(),
    )


def run_operator(config: OperatorConfig, verbose: bool = False) -> None:
    """Run in the foreground until SIGINT/SIGTERM (kopf handles both)."""
    logging.basicConfig(
        level=logging.DEBUG if verbose else logging.INFO,
        format="%(asctime)s %(levelname)s %(name)s: %(message)s",
    )
    if not verbose:
        logging.getLogger("kopf").setLevel(logging.WARNING)
    asyncio.run(operate(config))


class OperatorThread:
    """The operator in a daemon thread with its own event loop; always `stop()` it (or use
    it as a context manager)."""

    def __init__(self, config: OperatorConfig) -> None:
        self.config = config
        self._stop = threading.Event()
        self._ready = threading.Event()
        self._error: BaseException | None = None
        self._loop: asyncio.AbstractEventLoop | None = None
        self._thread = threading.Thread(target=self._main, name="trainmaster-operator",
                                        daemon=True)

    def _main(self) -> None:
        async def main() -> None:
            self._loop = asyncio.get_running_loop()
            await operate(self.config, self._stop, self._ready, in_thread=True)

        try:
            asyncio.run(main())
        except BaseException as exc:  # reported by start()/stop()
            self._error = exc

    def start(self, timeout: float = 60.0) -> OperatorThread:
        self._thread.start()
        waited = 0.0
        while not self._ready.wait(0.2):
            waited += 0.2
            if not self._thread.is_alive() or waited >= timeout:
                self.stop()
                raise RuntimeError(f"the operator did not start: {self._error!r}")
        return self

    def stop(self, timeout: float = 30.0) -> None:
        self._stop.set()
        self._thread.join(timeout)
        if self._thread.is_alive():
            raise RuntimeError(f"the operator thread did not stop in {timeout:.0f} s; where "
                               f"it was:\n{thread_report(self._thread, self._loop)}")

    @property
    def alive(self) -> bool:
        return self._thread.is_alive()

    def __enter__(self) -> OperatorThread:
        return self.start()

    def __exit__(self, *_: object) -> None:
        self.stop()


def thread_report(thread: threading.Thread, loop: asyncio.AbstractEventLoop | None) -> str:
    """Where a thread that will not stop is: its stack, and its event loop's unfinished
    tasks with theirs (read from another thread: a best effort, for the error message)."""
    out = io.StringIO()
    frame = sys._current_frames().get(thread.ident or -1)
    if frame is not None:
        out.write("".join(traceback.format_stack(frame, limit=12)))
    if loop is not None:
        for task in list(asyncio.all_tasks(loop)):
            out.write(f"task {task.get_name()}: {task.get_coro()!r}\n")
            task.print_stack(limit=4, file=out)
    return out.getvalue()
