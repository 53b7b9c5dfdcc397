"""`trainmaster launch -- CMD`: the launcher side of the operator's contract. It runs the
training command unchanged and reports, to the command's TrainingJob, heartbeats (output,
or a touched $TRAINMASTER_HEARTBEAT_FILE) and each checkpoint that completes in the
checkpoint directory. See docs/operator.md, "The launcher contract".
"""

from trainmaster.launch._checkpoints import CheckpointWatcher, Found, step_of
from trainmaster.launch._reporter import ApiSink, Sink, checkpoint_patch, heartbeat_patch
from trainmaster.launch._wrapper import HEARTBEAT_FILE_ENV, LaunchConfig, run_launch

__all__ = [
    "HEARTBEAT_FILE_ENV",
    "ApiSink",
    "CheckpointWatcher",
    "Found",
    "LaunchConfig",
    "Sink",
    "checkpoint_patch",
    "heartbeat_patch",
    "run_launch",
    "step_of",
]
