"""Environment variables that cross a process boundary: what the rendered pods set for
trainmaster's launcher (``trainmaster.objects`` writes them, ``trainmaster.launch``
reads them), what the launcher sets for the training processes it starts, and the one
the kubelet sets in every pod. Each name is spelled here only.
"""

from __future__ import annotations

from typing import Final

# --- set by the rendered pod, read by the launcher -----------------------------------

JOB_ENV: Final = "TRAINMASTER_JOB"
NAMESPACE_ENV: Final = "TRAINMASTER_NAMESPACE"
RESTART_ENV: Final = "TRAINMASTER_RESTART"
"""The attempt (status.attempt) the gang belongs to."""
RESUME_FROM_ENV: Final = "TRAINMASTER_RESUME_FROM"
"""The checkpoint the operator chose to resume from ("" for a fresh start)."""
RESUME_ARGS_ENV: Final = "TRAINMASTER_RESUME_ARGS"
RESUME_TEMPLATE_ENV: Final = "TRAINMASTER_RESUME_TEMPLATE"
GANG_UID_ENV: Final = "TRAINMASTER_GANG_UID"
"""The attempt's Job uid: the ranks of one gang agree on a checkpoint under it."""
METRICS_PORT_ENV: Final = "TRAINMASTER_METRICS_PORT"
METRICS_ADDRESS_ENV: Final = "TRAINMASTER_METRICS_ADDRESS"
CHECKPOINT_DIR_ENV: Final = "TRAINMASTER_CHECKPOINT_DIR"
CHECKPOINT_INTERVAL_ENV: Final = "TRAINMASTER_CHECKPOINT_INTERVAL_MINUTES"
CHECKPOINT_KEEP_ENV: Final = "TRAINMASTER_CHECKPOINT_KEEP"
RAIL_SUBNETS_ENV: Final = "TRAINMASTER_RAIL_SUBNETS"
ELASTIC_ENV: Final = "TRAINMASTER_ELASTIC"
"""``MIN:MAX`` of an elastic job run by trainmaster's own (python) launcher."""
RDZV_PORT_ENV: Final = "TRAINMASTER_RDZV_PORT"
RDZV_CANDIDATES_ENV: Final = "TRAINMASTER_RDZV_CANDIDATES"
"""An elastic torchrun job: the pods among which the launcher elects the c10d store."""
RDZV_NODES_ENV: Final = "TRAINMASTER_RDZV_NODES"
RDZV_REELECT_ENV: Final = "TRAINMASTER_RDZV_REELECT"
SERVICE_ACCOUNT_DIR_ENV: Final = "TRAINMASTER_SERVICE_ACCOUNT_DIR"

# --- set by the launcher for the training processes it starts ----------------------

HEARTBEAT_FILE_ENV: Final = "TRAINMASTER_HEARTBEAT_FILE"
PROGRESS_FILE_ENV: Final = "TRAINMASTER_PROGRESS_FILE"
STEP_PATTERN_ENV: Final = "TRAINMASTER_STEP_PATTERN"
RDZV_STRIDE_ENV: Final = "TRAINMASTER_RDZV_PORT_STRIDE"
"""Launcher i serves on TRAINMASTER_RDZV_PORT + i * this (default 0): one host, many
launchers (tests and `trainmaster launch` by hand)."""
RDZV_HOST_ENV: Final = "TRAINMASTER_RDZV_HOST"
"""Host of launcher {index}; default: MASTER_ADDR with its first label's `-0` -> `-{index}`
(the Indexed Job's pod names under the headless Service)."""
CHECKPOINT_NOW_ENV: Final = "TRAINMASTER_CHECKPOINT_NOW_FILE"
ROUND_ENV: Final = "TRAINMASTER_ELASTIC_ROUND"

# --- set by the kubelet --------------------------------------------------------------

IN_CLUSTER_ENV: Final = "KUBERNETES_SERVICE_HOST"
"""Set in every pod: the in-cluster rule of trainmaster.kubeclient (``in_pod``)."""
