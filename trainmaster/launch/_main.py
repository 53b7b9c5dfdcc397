"""The launcher bundle's command line (argparse: the bundle carries no typer). Same options
as `trainmaster launch`:

    python3 trainmaster-launch.pyz [options] -- CMD ...
"""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

from trainmaster.launch._progress import STEP_PATTERN, compile_step_pattern
from trainmaster.launch._wrapper import LaunchConfig, run_launch


def parser() -> argparse.ArgumentParser:
    p = argparse.ArgumentParser(
        prog="trainmaster-launch",
        description="Run a training command (after --) and report its progress and "
        "checkpoints to its TrainingJob. Exits with the command's exit code.")
    p.add_argument("--checkpoint-dir", type=Path, default=None,
                   help="Directory to watch (default: $TRAINMASTER_CHECKPOINT_DIR).")
    p.add_argument("--heartbeat-seconds", type=float, default=15.0)
    p.add_argument("--settle-seconds", type=float, default=5.0)
    p.add_argument("--step-pattern", default=None,
                   help=f"Regex whose first group is the step (default: "
                   f"$TRAINMASTER_STEP_PATTERN, else {STEP_PATTERN!r}); '' reads none.")
    p.add_argument("--metrics-port", type=int, default=None,
                   help="Serve Prometheus metrics here (default: $TRAINMASTER_METRICS_PORT).")
    p.add_argument("--metrics-address", default=None,
                   help="Address to serve them on (default: $TRAINMASTER_METRICS_ADDRESS, "
                   "else 127.0.0.1).")
    p.add_argument("--all-ranks", action="store_true")
    p.add_argument("--kubeconfig", type=Path, default=None)
    p.add_argument("command", nargs=argparse.REMAINDER)
    return p


def main(argv: list[str] | None = None) -> int:
    p = parser()
    args = p.parse_args(argv)
    command = list(args.command)
    if command and command[0] == "--":
        command = command[1:]
    if not command:
        p.print_usage(sys.stderr)
        print("trainmaster-launch: error: give the command to run after --", file=sys.stderr)
        return 2
    config = LaunchConfig.from_env(
        checkpoint_dir=args.checkpoint_dir, heartbeat_seconds=args.heartbeat_seconds,
        settle_seconds=args.settle_seconds, all_ranks=args.all_ranks or None,
        kubeconfig=args.kubeconfig, step_pattern=args.step_pattern,
        metrics_port=args.metrics_port, metrics_address=args.metrics_address)
    try:
        compile_step_pattern(config.step_pattern) if config.step_pattern else None
    except ValueError as exc:
        print(f"trainmaster-launch: error: {exc}", file=sys.stderr)
        return 2
    return run_launch(config, command)
