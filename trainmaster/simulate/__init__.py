"""``trainmaster simulate``: a discrete-event replay of a GPU workload through the
scheduler's own queue and placement core, compared with classic placement policies.

See docs/simulate.md for the model, its limits and the trace format.
"""

from trainmaster.simulate._report import write_report

from ._cluster import SimCluster, bench_cluster, spec_cluster
from ._convert import CONVERTERS, convert_trace
from ._elastic import MODES as ELASTIC_MODES
from ._elastic import ElasticModel, make_elastic
from ._engine import Simulation
from ._faults import FaultModel
from ._jobs import Job, WorkloadError
from ._metrics import PolicyResult, percentile
from ._policies import POLICIES, policy_names
from ._queues import QueueConfig, file_queues, resolve, spec_queues
from ._run import SimulationResult, simulate
from ._synthetic import synthetic_jobs
from ._trace import TraceError, load_trace, parse_trace

__all__ = [
    "CONVERTERS",
    "ELASTIC_MODES",
    "POLICIES",
    "ElasticModel",
    "FaultModel",
    "Job",
    "PolicyResult",
    "QueueConfig",
    "SimCluster",
    "Simulation",
    "SimulationResult",
    "TraceError",
    "WorkloadError",
    "bench_cluster",
    "convert_trace",
    "file_queues",
    "load_trace",
    "make_elastic",
    "parse_trace",
    "percentile",
    "policy_names",
    "resolve",
    "simulate",
    "spec_cluster",
    "spec_queues",
    "synthetic_jobs",
    "write_report",
]
