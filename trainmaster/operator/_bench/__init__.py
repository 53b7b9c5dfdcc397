"""TODO(issue 22, lead): `trainmaster bench recovery` now lives in trainmaster.bench
(_recovery.py, _recovery_world.py) and the operator's world in trainmaster.testworld. This
shim only keeps trainmaster/cli/_bench_recovery.py importing until it imports
`trainmaster.bench` (RECOVERY_SCENARIOS, BenchError, RecoveryOptions, run_recovery_bench)
and catches BenchError, a TrainmasterError, without re-wrapping it; then delete this
folder."""

from trainmaster.bench import RECOVERY_BASELINES as BASELINES
from trainmaster.bench import RECOVERY_SCENARIOS as SCENARIOS
from trainmaster.bench import BenchError, RecoveryOptions, run_recovery_bench
from trainmaster.bench import RecoveryRow as Row

__all__ = ["BASELINES", "SCENARIOS", "BenchError", "RecoveryOptions", "Row",
           "run_recovery_bench"]
