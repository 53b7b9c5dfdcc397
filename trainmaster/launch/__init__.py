"""`trainmaster launch -- CMD`: the launcher side of the operator's contract. It runs the
training command unchanged and reports, to the command's TrainingJob, heartbeats (a newer training
step in its output or in $TRAINMASTER_PROGRESS_FILE, a touched $TRAINMASTER_HEARTBEAT_FILE)
and each checkpoint that completes in the checkpoint directory, and serves the same as
Prometheus metrics. See docs/operator.md, "The launcher contract".
"""

from trainmaster.api import PROGRESS_FILE_ENV, STEP_PATTERN_ENV
from trainmaster.launch._bundle import BUNDLE_NAME, write_bundle
from trainmaster.launch._checkpoints import (
    MARKERS,
    CheckpointWatcher,
    Found,
    newest_complete,
    step_of,
)
from trainmaster.launch._metrics import METRIC_NAMES, METRICS_PORT, LaunchMetrics
from trainmaster.launch._progress import (
    STEP_PATTERN,
    Progress,
    compile_step_pattern,
)
from trainmaster.launch._reporter import ApiSink, Sink, checkpoint_patch, heartbeat_patch
from trainmaster.launch._resume import decision_file, fill, render_resume_args, resume_values
from trainmaster.launch._wrapper import HEARTBEAT_FILE_ENV, LaunchConfig, run_launch

__all__ = [
    "BUNDLE_NAME",
    "HEARTBEAT_FILE_ENV",
    "MARKERS",
    "METRICS_PORT",
    "METRIC_NAMES",
    "PROGRESS_FILE_ENV",
    "STEP_PATTERN",
    "STEP_PATTERN_ENV",
    "ApiSink",
    "CheckpointWatcher",
    "Found",
    "LaunchConfig",
    "LaunchMetrics",
    "Progress",
    "Sink",
    "checkpoint_patch",
    "compile_step_pattern",
    "decision_file",
    "fill",
    "heartbeat_patch",
    "newest_complete",
    "render_resume_args",
    "resume_values",
    "run_launch",
    "step_of",
    "write_bundle",
]
