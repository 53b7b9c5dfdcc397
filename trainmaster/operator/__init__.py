"""The trainmaster operator: it runs each TrainingJob as a gang (Indexed Job, headless
Service, PodGroup, launch ConfigMap), keeps those objects as declared, and brings failed
gangs back from their latest checkpoint: pod failures, sick nodes (fenced) and hangs.

See docs/operator.md for the launcher contract and what happens when.
"""

from trainmaster.api import FAILED, FENCED_ANNOTATION, PENDING, RESTARTING, RUNNING, SUCCEEDED
from trainmaster.operator._decide import backoff_seconds, decide
from trainmaster.operator._faults import HealthRules, find_fault, gang_view, node_health
from trainmaster.operator._fence import (
    fence_patch,
    fenced_record,
    unfence,
    unfence_nodes,
    unfence_patch,
)
from trainmaster.operator._model import (
    Action,
    Cause,
    Decision,
    Fault,
    GangView,
    JobState,
    NodeHealth,
    PodView,
)
from trainmaster.operator._runner import OperatorThread, operate, run_operator, thread_report
from trainmaster.operator._runtime import OperatorConfig
from trainmaster.operator._specs import SpecRef
from trainmaster.operator._warm_targets import cache_states, job_can_use, node_name, readers

__all__ = [
    "FAILED",
    "FENCED_ANNOTATION",
    "PENDING",
    "RESTARTING",
    "RUNNING",
    "SUCCEEDED",
    "Action",
    "Cause",
    "Decision",
    "Fault",
    "GangView",
    "HealthRules",
    "JobState",
    "NodeHealth",
    "OperatorConfig",
    "OperatorThread",
    "PodView",
    "SpecRef",
    "backoff_seconds",
    "cache_states",
    "decide",
    "fence_patch",
    "fenced_record",
    "find_fault",
    "gang_view",
    "job_can_use",
    "node_health",
    "node_name",
    "operate",
    "readers",
    "run_operator",
    "thread_report",
    "unfence",
    "unfence_nodes",
    "unfence_patch",
]
