"""Load a spec: parse, check against the JSON Schema, build the model, check semantics.

Every problem is collected and raised at once in one SpecInvalidError; a file that cannot
be read or parsed raises SpecReadError. Nothing else escapes.
"""

from __future__ import annotations

import difflib
import json
from collections.abc import Iterable
from functools import lru_cache
from pathlib import Path
from typing import TYPE_CHECKING, Any

from pydantic import ValidationError as PydanticError

from trainmaster.api import SPEC_SCHEMA_ID
from trainmaster.spec import _semantic
from trainmaster.spec._errors import SpecInvalidError, SpecIssue, SpecReadError
from trainmaster.spec._model import ClusterSpec, Job
from trainmaster.spec._schema_words import describe
from trainmaster.spec._yaml import NOT_FAST, LineMap, fast_parse, parse_document

if TYPE_CHECKING:
    # jsonschema (~0.4 s to import) explains a spec that fails; a valid one never needs it.
    from jsonschema import Draft202012Validator
    from jsonschema.exceptions import ValidationError


@lru_cache(maxsize=1)
def json_schema() -> dict[str, Any]:
    """The spec's JSON Schema (2020-12), generated from the model."""
    schema = ClusterSpec.model_json_schema(by_alias=True)
    return {"$schema": "https://json-schema.org/draft/2020-12/schema", "$id": SPEC_SCHEMA_ID,
            **schema}


@lru_cache(maxsize=1)
def _validator() -> Draft202012Validator:
    from jsonschema import Draft202012Validator

    return Draft202012Validator(json_schema())


@lru_cache(maxsize=1)
def _job_validator() -> Draft202012Validator:
    """The schema of one job (the spec's `jobs[]` item), with the definitions it refers to."""
    from jsonschema import Draft202012Validator

    defs = json_schema()["$defs"]
    return Draft202012Validator({"$defs": defs, **defs["Job"]})


_NOT_A_FIELD = {
    ("Job", "namespace"): (
        "a spec's jobs have no namespace of their own: they run in `metadata.namespace`. "
        "A team submits from its own namespace through a LocalQueue instead: add the "
        "namespace to `scheduler.namespaces` and a `scheduler.localQueues` entry for it, "
        "then the team creates its Job + PodGroup there with the LocalQueue's name in the "
        "`kueue.x-k8s.io/queue-name` label (docs/scheduler.md, \"Namespace queues\")"),
}
"""(schema title, key) -> why a field that users expect is not one, and what to do."""


def format_path(path: Iterable[str | int]) -> str:
    out = ""
    for part in path:
        out += f"[{part}]" if isinstance(part, int) else (f".{part}" if out else str(part))
    return out


def _line(lines: LineMap, path: tuple[str | int, ...]) -> tuple[int | None, int | None]:
    while path not in lines and path:
        path = path[:-1]
    return lines.get(path, (None, None))


def _branch_error(error: ValidationError) -> ValidationError:
    """The error of a union (`X | None`, a choice of shapes) that says what is wrong: not
    "is not of type null" from the branch the value never meant, but the deepest error of
    the branches its type matches (for `topology: {mode: require}`, the enum of `mode`)."""
    from jsonschema.exceptions import best_match

    while error.validator in ("anyOf", "oneOf") and error.context:
        meant = [e for e in error.context
                 if not (e.validator == "type" and not e.relative_path)]
        if not meant:
            fallback: ValidationError = best_match(error.context)
            return fallback
        deepest = max(len(e.absolute_path) for e in meant)
        error = best_match([e for e in meant if len(e.absolute_path) == deepest])
    return error


def _schema_issue(error: ValidationError, lines: LineMap) -> list[SpecIssue]:
    error = _branch_error(error)
    path = tuple(error.absolute_path)
    value: Any = error.instance
    kind = error.validator
    rule: Any = error.validator_value
    schema: Any = error.schema
    if kind == "required":
        missing = [k for k in rule if k not in value]
        return [
            SpecIssue(format_path((*path, k)), f"is required: add `{k}`", *_line(lines, path))
            for k in missing
        ]
    if kind == "additionalProperties":
        allowed = sorted(schema.get("properties", {}))
        issues = []
        for key in sorted(set(value) - set(allowed)):
            close = difflib.get_close_matches(str(key), allowed, n=1)
            hint = f"did you mean `{close[0]}`?" if close else f"allowed: {', '.join(allowed)}"
            hint = _NOT_A_FIELD.get((str(schema.get("title")), str(key)), hint)
            issues.append(
                SpecIssue(
                    format_path((*path, key)), f"unknown field: {hint}", *_line(lines, (*path, key))
                )
            )
        return issues
    shown = json.dumps(value, default=str)
    if len(shown) > 60:
        shown = shown[:57] + "..."
    field = next((str(p) for p in reversed(path) if isinstance(p, str)), "value")
    message = describe(field, str(kind), shown, error.validator_value, value,
                       schema if isinstance(schema, dict) else {},
                       json_schema()["$defs"]) or error.message
    return [SpecIssue(format_path(path), message, *_line(lines, path))]


def validate_data(data: Any, source: str, lines: LineMap | None = None) -> ClusterSpec:
    """Validate parsed data; return the model or raise SpecInvalidError with every issue."""
    lines = lines or {}
    if not isinstance(data, dict):
        kind = "empty" if data is None else f"a {type(data).__name__}"
        raise SpecInvalidError(
            source,
            [
                SpecIssue(
                    "",
                    f"the spec is {kind}; it must be a "
                    "mapping with apiVersion, kind, metadata, "
                    "topology and networks",
                    1,
                    1,
                )
            ],
        )
    try:
        # The schema is generated from this model, so a strict model validation accepts
        # exactly what the schema accepts, many times faster on large node lists. Only when
        # it fails do we run jsonschema, for its complete, path-precise messages.
        spec = ClusterSpec.model_validate(data, strict=True)
    except PydanticError as exc:
        issues: list[SpecIssue] = []
        for error in _validator().iter_errors(data):
            issues.extend(_schema_issue(error, lines))
        raise SpecInvalidError(
            source,
            issues
            or [
                SpecIssue(format_path(e["loc"]), e["msg"], *_line(lines, tuple(e["loc"])))
                for e in exc.errors()
            ],
        ) from None
    issues = _semantic.check(spec)
    if issues:
        raise SpecInvalidError(
            source,
            [SpecIssue(i.path, i.message, *_line(lines, _parse_path(i.path))) for i in issues],
        )
    return spec


def validate_job(spec: ClusterSpec, data: Any, source: str, path: str = "job") -> Job:
    """Validate one job against a cluster spec that was validated already: the job's schema
    and the job-level rules (queue, datasets, fit on the nodes, topology), nothing of the
    cluster again. Issues are named under `path`; raises SpecInvalidError with every one."""
    try:
        job = Job.model_validate(data, strict=True)
    except PydanticError as exc:
        issues = [
            SpecIssue(_under(path, issue.path), issue.message)
            for error in _job_validator().iter_errors(data)
            for issue in _schema_issue(error, {})
        ] or [SpecIssue(_under(path, format_path(e["loc"])), e["msg"]) for e in exc.errors()]
        raise SpecInvalidError(source, issues) from None
    issues = list(_semantic.check_job(spec, job, path))
    if issues:
        raise SpecInvalidError(source, issues)
    return job


def _under(prefix: str, path: str) -> str:
    if not path:
        return prefix
    return f"{prefix}{path}" if path.startswith("[") else f"{prefix}.{path}"


def _parse_path(path: str) -> tuple[str | int, ...]:
    out: list[str | int] = []
    for part in path.replace("[", ".[").split("."):
        if part.startswith("[") and part.endswith("]") and part[1:-1].isdigit():
            out.append(int(part[1:-1]))
        elif part:
            out.append(part)
    return tuple(out)


def load_spec_text(text: str, source: str = "<spec>") -> ClusterSpec:
    if not source.endswith(".json"):
        data = fast_parse(text)
        if data is not NOT_FAST:
            try:
                return validate_data(data, source)
            except SpecInvalidError:
                pass  # parse again, carefully, to report every problem with its line
    data, lines = parse_document(text, source)
    return validate_data(data, source, lines)


def load_spec(path: str | Path) -> ClusterSpec:
    """Read and validate a spec file; raise SpecReadError or SpecInvalidError."""
    source = str(path)
    try:
        raw = Path(path).read_bytes()
    except OSError as exc:
        raise SpecReadError(source, f"cannot read the file: {exc.strerror or exc}") from None
    try:
        text = raw.decode("utf-8")
    except UnicodeDecodeError as exc:
        raise SpecReadError(source, f"not UTF-8 text (byte {exc.start})") from None
    return load_spec_text(text, source)
