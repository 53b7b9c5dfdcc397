"""The cluster spec: model, loader and the errors it raises."""

from trainmaster.api import API_VERSION, BYTES_PATTERN, format_bytes, parse_bytes
from trainmaster.errors import TrainmasterError
from trainmaster.spec._bench import bench_job, bench_spec, large_spec_text
from trainmaster.spec._capacity import DomainCapacity
from trainmaster.spec._docs import reference_markdown
from trainmaster.spec._errors import (
    SpecError,
    SpecInvalidError,
    SpecIssue,
    SpecReadError,
)
from trainmaster.spec._fits import capacity_issues
from trainmaster.spec._load import _line as line_of
from trainmaster.spec._load import _parse_path as parse_path
from trainmaster.spec._load import (
    format_path,
    json_schema,
    load_spec,
    load_spec_text,
    validate_data,
    validate_job,
)
from trainmaster.spec._model import (
    DATASET_SCHEMES,
    CacheSpec,
    CheckpointMirror,
    ClusterSpec,
    Dataset,
    ImageSpec,
    Job,
    LocalQueue,
    LocalQueueSpec,
    Queue,
    ResolvedNode,
    SchedulerSpec,
    Switch,
    TopologyRule,
    default_topology_policy,
    resolve_nodes,
)
from trainmaster.spec._rules import job_domain_rule, job_gang, rule_for_size
from trainmaster.spec._semantic import queue_issues
from trainmaster.spec._starter import FABRICS, StarterShape, starter_spec
from trainmaster.spec._yaml import parse_document

# TODO(issue 22, lead): trainmaster/cli/_cache.py still imports `parse_quantity` from here;
# switch it to `from trainmaster.api import parse_bytes` and drop this alias.
parse_quantity = parse_bytes



__all__ = [
    "API_VERSION",
    "BYTES_PATTERN",
    "DATASET_SCHEMES",
    "FABRICS",
    "CacheSpec",
    "CheckpointMirror",
    "ClusterSpec",
    "Dataset",
    "DomainCapacity",
    "ImageSpec",
    "Job",
    "LocalQueue",
    "LocalQueueSpec",
    "Queue",
    "ResolvedNode",
    "SchedulerSpec",
    "SpecError",
    "SpecInvalidError",
    "SpecIssue",
    "SpecReadError",
    "StarterShape",
    "Switch",
    "TopologyRule",
    "TrainmasterError",
    "bench_job",
    "bench_spec",
    "capacity_issues",
    "default_topology_policy",
    "format_bytes",
    "format_path",
    "job_domain_rule",
    "job_gang",
    "json_schema",
    "large_spec_text",
    "line_of",
    "load_spec",
    "load_spec_text",
    "parse_bytes",
    "parse_document",
    "parse_path",
    "parse_quantity",
    "queue_issues",
    "reference_markdown",
    "resolve_nodes",
    "rule_for_size",
    "starter_spec",
    "validate_data",
    "validate_job",
]
