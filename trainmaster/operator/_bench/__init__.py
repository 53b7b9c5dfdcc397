"""`trainmaster bench recovery`: fault-to-running-again times of the operator on a local
control plane, next to a plain Indexed Job under the same faults. See ``_run``."""

from trainmaster.operator._bench._run import (
    BASELINES,
    SCENARIOS,
    BenchError,
    RecoveryOptions,
    Row,
    run_recovery_bench,
)

__all__ = ["BASELINES", "SCENARIOS", "BenchError", "RecoveryOptions", "Row",
           "run_recovery_bench"]
