"""`trainmaster-scheduler`: run one replica of the scheduler (see ``_service``).

Options override the config file (the ConfigMap the Deployment mounts), so one image
serves the Deployment, tests and benchmarks.
"""

from __future__ import annotations

import argparse
import asyncio
import dataclasses
import logging
import sys
from pathlib import Path
from typing import NoReturn

from trainmaster.kubeclient import KubeConfigError, describe_target

from .runtime.config import ConfigError, SchedulerConfig
from .runtime.service import ServiceOptions, serve

PROG = "trainmaster-scheduler"


class _Parser(argparse.ArgumentParser):
    """argparse, but a usage error is one line on stderr (argparse prints the whole
    multi-line usage first) and still exits 2."""

    def error(self, message: str) -> NoReturn:
        print(f"error: {message} (usage: {PROG} [OPTIONS]; see '{PROG} --help')",
              file=sys.stderr)
        raise SystemExit(2)


def _parser() -> argparse.ArgumentParser:
    p = _Parser(
        prog=PROG,
        description="Topology-aware gang scheduler for Kubernetes (trainmaster).",
    )
    p.add_argument("--config", type=Path, help="scheduler config file (YAML)")
    p.add_argument("--kubeconfig", type=Path, help="kubeconfig (default, as kubectl: "
                   "$KUBECONFIG, in-cluster, ~/.kube/config)")
    p.add_argument("--scheduler-name", help="schedule pods with this spec.schedulerName")
    p.add_argument("--levels", help="topology levels top first, comma-separated")
    p.add_argument("--identity", help="leader-election identity (default: host_pid)")
    p.add_argument("--metrics-address", help="listen address for /metrics")
    p.add_argument("--metrics-port", type=int, help="port for /metrics (0: off)")
    p.add_argument("--bind-concurrency", type=int, help="Binding API calls in flight")
    p.add_argument("--client-qps", type=float, help="client-side request rate limit")
    p.add_argument("--client-burst", type=int, help="client-side burst")
    p.add_argument("--gang-timeout", type=float, help="seconds before a gang is starving")
    p.add_argument("--node-selector", help="only nodes with these labels: key=value,...")
    p.add_argument("--leader-elect", action=argparse.BooleanOptionalAction, default=None,
                   help="campaign for the Lease before scheduling (default: on)")
    p.add_argument("--lease-name")
    p.add_argument("--lease-namespace")
    p.add_argument("--lease-duration", type=float)
    p.add_argument("--renew-deadline", type=float)
    p.add_argument("--retry-period", type=float)
    p.add_argument("--wait-for-stdin", action="store_true",
                   help="start only after a line on stdin (benchmarks)")
    p.add_argument("--log-level", default="INFO")
    return p


def build_config(args: argparse.Namespace) -> SchedulerConfig:
    config = SchedulerConfig.load(args.config) if args.config else SchedulerConfig()
    changes: dict[str, object] = {}
    plain = {
        "scheduler_name": args.scheduler_name,
        "metrics_address": args.metrics_address,
        "metrics_port": args.metrics_port,
        "bind_concurrency": args.bind_concurrency,
        "client_qps": args.client_qps,
        "client_burst": args.client_burst,
        "gang_timeout_seconds": args.gang_timeout,
    }
    changes.update({k: v for k, v in plain.items() if v is not None})
    if args.node_selector is not None:
        pairs = [x.split("=", 1) for x in args.node_selector.split(",") if x]
        if any(len(p) != 2 or not p[0] for p in pairs):
            raise ConfigError(f"--node-selector {args.node_selector!r}: use key=value,...")
        changes["node_selector"] = dict(pairs)
    if args.levels is not None:
        changes["levels"] = tuple(x for x in args.levels.split(",") if x)
    election = {
        "enabled": args.leader_elect,
        "lease_name": args.lease_name,
        "lease_namespace": args.lease_namespace,
        "lease_duration": args.lease_duration,
        "renew_deadline": args.renew_deadline,
        "retry_period": args.retry_period,
    }
    election = {k: v for k, v in election.items() if v is not None}
    if election:
        changes["leader_election"] = dataclasses.replace(config.leader_election, **election)
    config = config.replace(**changes)
    config.validate()
    return config


def main(argv: list[str] | None = None) -> int:
    args = _parser().parse_args(argv)
    logging.basicConfig(
        level=args.log_level.upper(),
        format="%(asctime)s %(levelname)s %(name)s: %(message)s",
        stream=sys.stderr,
    )
    try:
        config = build_config(args)
    except (ConfigError, ValueError) as err:
        print(f"error: {err}", file=sys.stderr)
        return 2
    options = ServiceOptions(args.kubeconfig, args.identity, args.wait_for_stdin)
    try:
        # The cluster it is about to serve, named before anything else (as every
        # trainmaster command does).
        print(f"{PROG}: {describe_target(args.kubeconfig).describe()}", file=sys.stderr,
              flush=True)
        return asyncio.run(serve(config, options))
    except KubeConfigError as err:
        print(f"error: no usable kubeconfig ({err}); pass --kubeconfig, set $KUBECONFIG "
              "or run in a cluster", file=sys.stderr)
        return 1
    except KeyboardInterrupt:
        return 130


if __name__ == "__main__":
    sys.exit(main())
