"""`trainmaster launch` for an elastic gang: the Agent (see _elastic) starts the training
command once per round; this module gives each start the wrapper's plumbing (output passed
through and read for steps, signals passed on) and reports to the TrainingJob while this
launcher holds rank 0. Standard library only (launcher bundle)."""

from __future__ import annotations

import os
import subprocess
import sys
import tempfile
import threading
from pathlib import Path

from trainmaster.api import ELASTIC_ENV, HEARTBEAT_FILE_ENV, PROGRESS_FILE_ENV
from trainmaster.launch._config import LaunchConfig
from trainmaster.launch._elastic import Agent, ElasticConfig, ElasticError
from trainmaster.launch._plumbing import Reports, forward_output, pass_signals, serve_metrics
from trainmaster.launch._progress import LineFeed, Progress
from trainmaster.launch._reporter import Sink


def elastic_config(index: int | None) -> ElasticConfig | None:
    """The elastic settings of this pod, or None for a rigid gang; raises ElasticError."""
    env = os.environ
    pod = env.get("JOB_COMPLETION_INDEX") or ""
    own = int(pod) if pod.isdigit() else index
    if not env.get(ELASTIC_ENV):
        return None
    if own is None:
        raise ElasticError("an elastic launcher needs its pod's index: JOB_COMPLETION_INDEX")
    return ElasticConfig.from_env(env, own)


def run_elastic(config: LaunchConfig, elastic: ElasticConfig, command: list[str],
                sink: Sink) -> int:
    pattern = None
    if config.step_pattern:
        from trainmaster.launch._progress import compile_step_pattern
        pattern = compile_step_pattern(config.step_pattern)
    progress = Progress(pattern)
    heartbeat_file = Path(tempfile.gettempdir()) / f"trainmaster-heartbeat-{os.getpid()}"
    progress_file = Path(os.environ.get(PROGRESS_FILE_ENV) or
                         Path(tempfile.gettempdir()) / f"trainmaster-progress-{os.getpid()}")
    children: list[subprocess.Popen[bytes]] = []

    def start(argv: list[str], env: dict[str, str]) -> subprocess.Popen[bytes]:
        env = {**env, HEARTBEAT_FILE_ENV: str(heartbeat_file),
               PROGRESS_FILE_ENV: str(progress_file)}
        child = subprocess.Popen(argv, stdout=subprocess.PIPE, stderr=subprocess.PIPE, env=env)
        assert child.stdout is not None and child.stderr is not None
        for source, target in ((child.stdout, sys.stdout.buffer),
                               (child.stderr, sys.stderr.buffer)):
            threading.Thread(target=forward_output, args=(source, target, LineFeed(progress)),
                             daemon=True).start()
        children[:] = [child]
        return child

    agent = Agent(elastic, command, dict(os.environ), config.checkpoint_dir, start)
    restore = pass_signals(lambda: children[0] if children else None)
    metrics = serve_metrics(config)
    reports = Reports(config, sink, progress, heartbeat_file, progress_file, metrics)
    ticker = threading.Event()

    def report() -> None:
        # Only rank 0 of the running round reports: one writer, as for a rigid gang.
        while not ticker.wait(config.poll_seconds):
            if agent.is_rank0:
                reports.tick()

    thread = threading.Thread(target=report, daemon=True)
    thread.start()
    try:
        return agent.run()
    finally:
        ticker.set()
        thread.join(5)
        if agent.is_rank0 or (agent.round is not None and agent.round.done):
            reports.tick(force=True)  # a checkpoint finished just before exit still counts
        restore()
        heartbeat_file.unlink(missing_ok=True)
        if metrics is not None:
            metrics.close()
