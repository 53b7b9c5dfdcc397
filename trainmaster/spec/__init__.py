"""The cluster spec: model, loader and the errors it raises."""

from trainmaster.errors import TrainmasterError
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
)
from trainmaster.spec._model import (
    API_VERSION,
    ClusterSpec,
    ImageSpec,
    Job,
    ResolvedNode,
    TopologyRule,
)
from trainmaster.spec._quantity import format_bytes, parse_quantity
from trainmaster.spec._rules import job_domain_rule

__all__ = [
    "API_VERSION",
    "ClusterSpec",
    "ImageSpec",
    "Job",
    "ResolvedNode",
    "SpecError",
    "SpecInvalidError",
    "SpecIssue",
    "SpecReadError",
    "TopologyRule",
    "TrainmasterError",
    "format_bytes",
    "format_path",
    "job_domain_rule",
    "json_schema",
    "load_spec",
    "load_spec_text",
    "parse_quantity",
    "validate_data",
]
