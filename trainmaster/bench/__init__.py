"""Benchmarks on a real local control plane.

``run_scheduler_bench`` is `trainmaster bench scheduler`: trainmaster-scheduler against
the stock kube-scheduler (default and tuned) and a decision-free bind ceiling, each alone
on the same fresh pending gangs; see ``_run`` for the procedure and ``_contenders`` for
what each clock includes. ``placement_microbench`` and ``placement_at_scale`` are `trainmaster bench
placement`: the placement core alone on a large simulated cluster (decisions, node
events, memory); ``admission_at_scale`` is `bench placement --queues Q`: the same
decision with admission through a cohort tree next to the flat one; ``queue_bench`` is
`bench queue`: the cycle with a deep queue, with and without the wake-up index.
"""

from trainmaster.bench._admission import AdmissionResult, admission_at_scale
from trainmaster.bench._contenders import CONTENDERS
from trainmaster.bench._deep import DeepResult, DeepRun, PhaseFigures, run_deep_bench
from trainmaster.bench._errors import BenchError
from trainmaster.bench._failover import FailoverOptions, run_failover_bench
from trainmaster.bench._placement import (
    PlacementResult,
    ScaleResult,
    placement_at_scale,
    placement_microbench,
)
from trainmaster.bench._preemption import run_preemption_bench
from trainmaster.bench._queue import QueueResult, QueueRun, queue_bench
from trainmaster.bench._recovery import (
    BASELINES as RECOVERY_BASELINES,
)
from trainmaster.bench._recovery import (
    SCENARIOS as RECOVERY_SCENARIOS,
)
from trainmaster.bench._recovery import (
    RecoveryOptions,
    run_recovery_bench,
)
from trainmaster.bench._recovery import (
    Row as RecoveryRow,
)
from trainmaster.bench._run import (
    BenchOptions,
    BenchResult,
    ContenderResult,
    run_scheduler_bench,
)
from trainmaster.bench._torch_loopback import (
    TORCH_SCENARIO,
    LoopbackPod,
    run_torch_loopback_bench,
)
from trainmaster.bench._trees import placement_before_after
from trainmaster.bench._ui import ViewTime, bench_ui, build_world, served
from trainmaster.bench._workload import gang_sizes, leaves_needed, workload

__all__ = [
    "CONTENDERS",
    "RECOVERY_BASELINES",
    "RECOVERY_SCENARIOS",
    "TORCH_SCENARIO",
    "AdmissionResult",
    "BenchError",
    "BenchOptions",
    "BenchResult",
    "ContenderResult",
    "DeepResult",
    "DeepRun",
    "FailoverOptions",
    "LoopbackPod",
    "PhaseFigures",
    "PlacementResult",
    "QueueResult",
    "QueueRun",
    "RecoveryOptions",
    "RecoveryRow",
    "ScaleResult",
    "ViewTime",
    "admission_at_scale",
    "bench_ui",
    "build_world",
    "gang_sizes",
    "leaves_needed",
    "placement_at_scale",
    "placement_before_after",
    "placement_microbench",
    "queue_bench",
    "run_deep_bench",
    "run_failover_bench",
    "run_preemption_bench",
    "run_recovery_bench",
    "run_scheduler_bench",
    "run_torch_loopback_bench",
    "served",
    "workload",
]
