"""``trainmaster simulate``: a discrete-event replay of a GPU workload through the
scheduler's own queue and placement core, compared with classic placement policies.

See docs/simulate.md for the model, its limits and the trace format.
"""

from trainmaster.simulate._report import write_report

from ._cluster import SimCluster, bench_cluster, spec_cluster
from ._columns import DISRUPTIONS, ELASTIC, FAIRNESS, POLICY, PREEMPTION, QUEUES, rows
from ._compare import changed_faults, changed_queues, difference, parse_change
from ._convert import CONVERTERS, convert_trace
from ._elastic import MODES as ELASTIC_MODES
from ._elastic import ElasticModel, make_elastic
from ._engine import Simulation
from ._faults import FaultModel
from ._jobs import Job, WorkloadError
from ._jobs_out import write_jobs
from ._metrics import PolicyResult, percentile
from ._mix import assign_queues, default_mix, largest_job, parse_queue_mix
from ._policies import POLICIES, policy_names
from ._queues import QueueConfig, file_queues, resolve, spec_queues
from ._run import SimulationResult, simulate
from ._spec_jobs import spec_jobs
from ._synthetic import synthetic_jobs
from ._trace import TraceError, load_trace, parse_trace

__all__ = [
    "CONVERTERS",
    "DISRUPTIONS",
    "ELASTIC",
    "ELASTIC_MODES",
    "FAIRNESS",
    "POLICIES",
    "POLICY",
    "PREEMPTION",
    "QUEUES",
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
    "assign_queues",
    "bench_cluster",
    "changed_faults",
    "changed_queues",
    "convert_trace",
    "default_mix",
    "difference",
    "file_queues",
    "largest_job",
    "load_trace",
    "make_elastic",
    "parse_change",
    "parse_queue_mix",
    "parse_trace",
    "percentile",
    "policy_names",
    "resolve",
    "rows",
    "simulate",
    "spec_cluster",
    "spec_jobs",
    "spec_queues",
    "synthetic_jobs",
    "write_jobs",
    "write_report",
]
