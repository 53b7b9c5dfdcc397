"""How `trainmaster launch` is set up: from the pod's environment and its options."""

from __future__ import annotations

import os
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from trainmaster.api import (
    CHECKPOINT_DIR_ENV,
    JOB_ENV,
    METRICS_ADDRESS_ENV,
    METRICS_PORT_ENV,
    NAMESPACE_ENV,
    RESTART_ENV,
    STEP_PATTERN_ENV,
)
from trainmaster.launch._progress import STEP_PATTERN


@dataclass(frozen=True)
class LaunchConfig:
    job: str | None
    namespace: str | None
    rank: int | None = None
    checkpoint_dir: Path | None = None
    heartbeat_seconds: float = 15.0
    settle_seconds: float = 5.0
    poll_seconds: float = 1.0
    all_ranks: bool = False
    kubeconfig: Path | None = None
    step_pattern: str = STEP_PATTERN
    """Regular expression whose first group is the step; "" reads no steps from output."""
    metrics_port: int | None = None
    metrics_address: str = "127.0.0.1"
    attempt: int = 0

    @classmethod
    def from_env(cls, env: Mapping[str, str] | None = None, **options: Any) -> LaunchConfig:
        """From the environment the gang's pods get (TRAINMASTER_JOB, TRAINMASTER_NAMESPACE,
        TRAINMASTER_CHECKPOINT_DIR, JOB_COMPLETION_INDEX); options override it."""
        env = os.environ if env is None else env
        # Inside torchrun (`torchrun ... trainmaster launch -- python train.py`) RANK is the
        # global rank; around it, the pod's index in the Indexed Job is.
        rank = env.get("RANK") or env.get("JOB_COMPLETION_INDEX", "")
        ckpt = env.get(CHECKPOINT_DIR_ENV)
        kubeconfig = env.get("KUBECONFIG")
        port = env.get(METRICS_PORT_ENV, "")
        attempt = env.get(RESTART_ENV, "")
        values: dict[str, Any] = {
            "job": env.get(JOB_ENV) or None,
            "namespace": env.get(NAMESPACE_ENV) or None,
            "rank": int(rank) if rank.isdigit() else None,
            "checkpoint_dir": Path(ckpt) if ckpt else None,
            "kubeconfig": Path(kubeconfig.split(os.pathsep)[0]) if kubeconfig else None,
            "metrics_port": int(port) if port.isdigit() else None,
            "metrics_address": env.get(METRICS_ADDRESS_ENV) or "127.0.0.1",
            "attempt": int(attempt) if attempt.isdigit() else 0,
        }
        if STEP_PATTERN_ENV in env:
            values["step_pattern"] = env[STEP_PATTERN_ENV]
        values.update({k: v for k, v in options.items() if v is not None})
        return cls(**values)

    @property
    def reports(self) -> bool:
        return bool(self.job and self.namespace) and (self.all_ranks or self.rank in (None, 0))
