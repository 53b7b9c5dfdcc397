"""`trainmaster launch -- CMD`: run the training command and report for it.

The wrapper is transparent: the command's stdout and stderr pass through unchanged, the
signals the pod gets (SIGTERM on deletion, SIGINT) are passed on, and it exits with the
command's exit code (128+N when killed by signal N), which is what the operator's
retryable-exit-code policy reads.

Progress it reports as a heartbeat, at most every --heartbeat-seconds (see _progress):
- a training step newer than the last, parsed from the output with --step-pattern;
- a step written to $TRAINMASTER_PROGRESS_FILE, or a touch of $TRAINMASTER_HEARTBEAT_FILE,
  for quiet programs;
- a completed checkpoint (see _checkpoints).
Before it starts the command, it may move the resume point to a newer complete checkpoint
in the checkpoint directory, the same one on every rank (see _resume).
Other output is not progress. Only rank 0 reports to the TrainingJob by default ($RANK
when torchrun runs the wrapper, else the pod's JOB_COMPLETION_INDEX): ranks of one gang
progress together, and one writer keeps the API load flat however large the gang. Every
rank serves its own progress as Prometheus metrics when given --metrics-port.
"""

from __future__ import annotations

import os
import subprocess
import sys
import tempfile
import threading
import time
from pathlib import Path

from trainmaster.api import HEARTBEAT_FILE_ENV, PROGRESS_FILE_ENV, RESUME_FROM_ENV
from trainmaster.launch._config import LaunchConfig
from trainmaster.launch._elastic_run import elastic_config, run_elastic
from trainmaster.launch._plumbing import (
    NullSink,
    Reports,
    forward_output,
    pass_signals,
    serve_metrics,
)
from trainmaster.launch._progress import (
    LineFeed,
    Progress,
    compile_step_pattern,
)
from trainmaster.launch._rails import has_rdma_devices, interface_addresses, rail_env
from trainmaster.launch._reporter import ApiSink, Sink
from trainmaster.launch._resume import plan_start, print_notes
from trainmaster.launch._store import (
    Election,
    StoreCandidates,
    StoreError,
    elect,
    is_torchrun,
    serving,
    with_endpoint,
)
from trainmaster.launch._store import say as _store_say
from trainmaster.launch._torchrun import agent_command

__all__ = ["HEARTBEAT_FILE_ENV", "LaunchConfig", "run_launch"]


def run_launch(config: LaunchConfig, command: list[str], sink: Sink | None = None) -> int:
    """Run `command` to completion while reporting; return its exit code."""
    began = time.time()  # a restart's cost is counted from here to the first step
    owned = sink is None
    try:
        elastic = elastic_config(config.rank)
    except ValueError as exc:
        print(f"trainmaster launch: error: {exc}", file=sys.stderr, flush=True)
        return 2
    if sink is None:
        # An elastic launcher may hold rank 0 in some round: it may report.
        sink = ApiSink(config.namespace or "", config.job or "", config.kubeconfig) \
            if config.reports or (elastic and config.job and config.namespace) else NullSink()
    if elastic is not None:
        try:
            return run_elastic(config, elastic, command, sink)
        finally:
            if owned and isinstance(sink, ApiSink):
                sink.close()
    pattern = compile_step_pattern(config.step_pattern) if config.step_pattern else None
    heartbeat_file = Path(tempfile.gettempdir()) / f"trainmaster-heartbeat-{os.getpid()}"
    progress_file = Path(os.environ.get(PROGRESS_FILE_ENV) or
                         Path(tempfile.gettempdir()) / f"trainmaster-progress-{os.getpid()}")
    start = plan_start(command, os.environ, config.checkpoint_dir)
    print_notes(start)
    command = start.command
    rails = rail_env(start.env, interface_addresses(), has_rdma_devices())
    if rails:
        print("trainmaster launch: collectives over the rails: "
              + ", ".join(f"{k}={v}" for k, v in sorted(rails.items())), file=sys.stderr)
    env = {**start.env, **rails, HEARTBEAT_FILE_ENV: str(heartbeat_file),
           PROGRESS_FILE_ENV: str(progress_file)}
    try:
        store = StoreCandidates.from_env(start.env) if is_torchrun(command) else None
    except StoreError as exc:
        print(f"trainmaster launch: error: {exc}", file=sys.stderr, flush=True)
        return 2
    elected = _elect(store)
    progress = Progress(pattern)

    def run(argv: list[str]) -> tuple[subprocess.Popen[bytes], list[threading.Thread]]:
        child = subprocess.Popen(argv, stdout=subprocess.PIPE, stderr=subprocess.PIPE, env=env)
        assert child.stdout is not None and child.stderr is not None
        pumps = [threading.Thread(target=forward_output, args=(source, target,
                                                                LineFeed(progress)), daemon=True)
                 for source, target in ((child.stdout, sys.stdout.buffer),
                                        (child.stderr, sys.stderr.buffer))]
        for pump in pumps:
            pump.start()
        return child, pumps

    try:
        child, pumps = run(agent_command(_store_command(command, elected), env))
    except OSError as exc:
        print(f"trainmaster launch: cannot run {command[0]}: {exc.strerror or exc}",
              file=sys.stderr)
        return 127
    restore = pass_signals(lambda: child)
    metrics = serve_metrics(config)
    reports = Reports(config, sink, progress, heartbeat_file, progress_file, metrics,
                      restarting=bool(start.env.get(RESUME_FROM_ENV)), started=began)
    if start.resumed is not None:
        reports.resumed(*start.resumed)
    reelections = store.reelect if store else 0
    lost: set[int] = set()
    try:
        reports.tick(force=True)  # started: the first sign of life
        while True:
            while child.poll() is None:
                time.sleep(config.poll_seconds)
                reports.tick()
            # The rest of its output; a worker it left behind may hold the pipes open
            # (torchrun's workers outlive an agent that failed), so 2 s at most in all.
            done_by = time.monotonic() + 2
            for pump in pumps:
                pump.join(max(0.0, done_by - time.monotonic()))
            if not _store_lost(store, elected, child.returncode) or reelections <= 0:
                break
            # torchrun failed because its store's pod is gone: the survivors go on with
            # the next pod's store (the pod itself stays; see _store).
            reelections -= 1
            assert elected is not None
            _store_say(f"{elected.endpoint} is gone; electing again "
                       f"({reelections} more allowed)")
            lost.add(elected.index)
            elected = _elect(store, frozenset(lost))
            child, pumps = run(agent_command(_store_command(command, elected), env))
        # A checkpoint finished just before exit still counts: one look to note what is on
        # disk (a busy node may not have looked since it was written), then the final one.
        reports.tick()
        reports.tick(force=True)  # a checkpoint finished just before exit still counts
    finally:
        restore()
        heartbeat_file.unlink(missing_ok=True)
        if metrics is not None:
            metrics.close()
        if owned and isinstance(sink, ApiSink):
            sink.close()
        if child.poll() is None:
            child.kill()
            child.wait()
    code = child.returncode
    return 128 - code if code < 0 else code




def _elect(store: StoreCandidates | None, lost: frozenset[int] = frozenset()
           ) -> Election | None:
    if store is None:
        return None
    elected = elect(store, lost=lost)
    _store_say(f"{elected.endpoint} ({'this pod hosts it' if elected.is_host else 'joining'})")
    return elected


def _store_command(command: list[str], elected: Election | None) -> list[str]:
    return command if elected is None else with_endpoint(command, elected)


def _store_lost(store: StoreCandidates | None, elected: Election | None, code: int) -> bool:
    """torchrun failed and the store it used (another pod's) no longer answers."""
    return (store is not None and elected is not None and code != 0
            and not elected.is_host and not serving((elected.host, elected.port)))
