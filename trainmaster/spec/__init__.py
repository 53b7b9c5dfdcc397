"""The cluster spec: model, loader and the errors it raises."""

from trainmaster.errors import TrainmasterError
from trainmaster.spec._capacity import DomainCapacity
from trainmaster.spec._errors import (
    SpecError,
    SpecInvalidError,
    SpecIssue,
    SpecReadError,
)
from trainmaster.spec._load import (
    format_path,
    json_schema,
    load_spec,
    load_spec_text,
    validate_data,
    validate_job,
)
from trainmaster.spec._model import (
    API_VERSION,
    DATASET_SCHEMES,
    CacheSpec,
    ClusterSpec,
    Dataset,
    ImageSpec,
    Job,
    Queue,
    ResolvedNode,
    Switch,
    TopologyRule,
    default_topology_policy,
)
from trainmaster.spec._quantity import format_bytes, parse_quantity
from trainmaster.spec._rules import job_domain_rule, rule_for_size

__all__ = [
    "API_VERSION",
    "DATASET_SCHEMES",
    "CacheSpec",
    "ClusterSpec",
    "Dataset",
    "DomainCapacity",
    "ImageSpec",
    "Job",
    "Queue",
    "ResolvedNode",
    "SpecError",
    "SpecInvalidError",
    "SpecIssue",
    "SpecReadError",
    "Switch",
    "TopologyRule",
    "TrainmasterError",
    "default_topology_policy",
    "format_bytes",
    "format_path",
    "job_domain_rule",
    "json_schema",
    "load_spec",
    "load_spec_text",
    "parse_quantity",
    "rule_for_size",
    "validate_data",
    "validate_job",
]
