"""The TrainingJob CRD's spec schema is generated from the spec's Job model; these tests
prove the two say the same thing: each field of the model is in the schema with the same
type, enum and bounds (read from the model's Python types, not from the generator's
input), and objects the API server accepts are the objects the operator's model accepts,
for hypothesis-generated objects near the boundaries of every field."""

from __future__ import annotations

import types
from typing import Annotated, Any, Literal, Union, get_args, get_origin

import annotated_types as at
import jsonschema
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from pydantic import BaseModel, ValidationError
from pydantic.fields import FieldInfo

from trainmaster.objects import trainingjob_crd
from trainmaster.objects._openapi import PRESERVE
from trainmaster.spec import Job

JSON = dict[str, Any]

MODEL_ONLY = {
    ("arguments", "hyperParameter"): "placeholders must be known (a field validator)",
    ("arguments", "resume"): "placeholders must be known (a field validator)",
    ("restartPolicy", "retryableExitCodes"): '"any" or a list of codes: a union of types',
    ("hyperParameters",): "string, integer, number or boolean values: a union of types",
}
"""What the model checks and a structural schema cannot: the API server stores these
values as they are, and the operator reports a bad one (SpecValid=False, InvalidSpec)."""


def _spec_schema() -> JSON:
    version = trainingjob_crd()["spec"]["versions"][0]
    return version["schema"]["openAPIV3Schema"]["properties"]["spec"]  # type: ignore[no-any-return]


# --- 1. field by field, from the model's own types ----------------------------------

_SCALARS = {int: "integer", str: "string", bool: "boolean", float: "number"}


def _constraints(metadata: list[Any], kind: str) -> JSON:
    out: JSON = {}
    for item in metadata:
        if isinstance(item, FieldInfo):
            out.update(_constraints(item.metadata, kind))
        elif isinstance(item, at.Ge):
            out["minimum"] = item.ge
        elif isinstance(item, at.Le):
            out["maximum"] = item.le
        elif isinstance(item, at.MinLen):
            out["minItems" if kind == "array" else "minLength"] = item.min_length
        elif isinstance(item, at.MaxLen):
            out["maxItems" if kind == "array" else "maxLength"] = item.max_length
        elif getattr(item, "pattern", None) is not None:
            out["pattern"] = item.pattern
    return out


def expected(annotation: Any, metadata: list[Any]) -> JSON:
    """The structural schema a field of this Python type and these constraints must have."""
    origin = get_origin(annotation)
    if origin is Annotated:
        inner, *extra = get_args(annotation)
        return expected(inner, [*metadata, *extra])
    if origin in (Union, types.UnionType):
        options = [a for a in get_args(annotation) if a is not type(None)]
        nullable = {"nullable": True} if len(options) < len(get_args(annotation)) else {}
        if len(options) == 1:
            return {**expected(options[0], metadata), **nullable}
        return {PRESERVE: True, **nullable}
    if origin is Literal:
        return {"type": "string", "enum": list(get_args(annotation))}
    if origin is list:
        return {"type": "array", "items": expected(get_args(annotation)[0], []),
                **_constraints(metadata, "array")}
    if origin is dict:
        return {"type": "object", "additionalProperties": expected(get_args(annotation)[1], [])}
    if isinstance(annotation, type) and issubclass(annotation, BaseModel):
        fields = annotation.model_fields
        out: JSON = {"type": "object", PRESERVE: True, "properties": {
            f.alias or n: expected(f.annotation, f.metadata) for n, f in fields.items()}}
        required = [f.alias or n for n, f in fields.items() if f.is_required()]
        if required:
            out["required"] = required
        return out
    kind = _SCALARS[annotation]
    return {"type": kind, **_constraints(metadata, kind)}


_COMPARED = {"type", "enum", "minimum", "maximum", "minLength", "maxLength", "minItems",
             "maxItems", "pattern", "nullable", "required", PRESERVE}


def _shape(node: JSON) -> JSON:
    out = {k: v for k, v in node.items() if k in _COMPARED}
    if "properties" in node:
        out["properties"] = {k: _shape(v) for k, v in node["properties"].items()}
    for key in ("items", "additionalProperties"):
        if key in node:
            out[key] = _shape(node[key])
    return out


def test_every_field_of_the_model_is_in_the_crd_with_its_type_enum_and_bounds() -> None:
    schema = _shape(_spec_schema())
    model = expected(Job, [])
    assert set(schema["properties"]) == set(model["properties"])
    for name, field in model["properties"].items():
        assert schema["properties"][name] == field, name
    assert schema == model


def test_the_crd_schema_is_structural() -> None:
    """What the API server demands of a CRD schema (apiextensions' structural schema):
    every node typed unless it keeps unknown fields, no $ref, no type inside a union, no
    defaults (which the API server would store)."""
    def walk(node: JSON, path: str) -> None:
        assert "$ref" not in node and "default" not in node, path
        assert "type" in node or node.get(PRESERVE) or "x-kubernetes-int-or-string" in node, path
        for key in ("anyOf", "allOf", "oneOf"):
            for option in node.get(key, []):
                assert "type" not in option, path
        for name, child in node.get("properties", {}).items():
            walk(child, f"{path}.{name}")
        for key in ("items", "additionalProperties"):
            if isinstance(node.get(key), dict):
                walk(node[key], f"{path}[]")
    walk(trainingjob_crd()["spec"]["versions"][0]["schema"]["openAPIV3Schema"], "")


# --- 2. the same objects valid for the API server and for the model -----------------

def _any_json() -> st.SearchStrategy[Any]:
    scalars = st.one_of(st.none(), st.booleans(), st.integers(-5, 300),
                        st.floats(allow_nan=False, allow_infinity=False), st.text(max_size=8))
    return st.one_of(scalars, st.lists(st.integers(-5, 300), max_size=3))


def _wrong(node: JSON) -> st.SearchStrategy[Any]:
    """Values just outside what the node allows: past a bound, too long, another type."""
    kind = node.get("type")
    options: list[st.SearchStrategy[Any]] = [st.none()]
    if kind == "integer":
        options += [st.just(node[b] + d) for b, d in (("minimum", -1), ("maximum", 1)) if b in node]
        options += [st.just("1"), st.just(1.5), st.just(True)]
    elif kind == "string":
        if "maxLength" in node:
            options.append(st.just("a" * (node["maxLength"] + 1)))
        if node.get("minLength"):
            options.append(st.just(""))
        if "enum" in node:
            options.append(st.just(node["enum"][0].upper() + "x"))
        if "pattern" in node:
            options.append(st.just("Not Valid!"))
        options.append(st.just(3))
    elif kind == "array":
        options += [st.just("x"), st.just([None])]
        if "maxItems" in node:
            options.append(st.just([None] * (node["maxItems"] + 1)))
    elif kind == "object":
        options += [st.just([]), st.just("x")]
    elif kind == "boolean":
        options += [st.just("true"), st.just(1)]
    return st.one_of(options)


def _valid(node: JSON, depth: int = 0) -> st.SearchStrategy[Any]:
    kind = node.get("type")
    base: st.SearchStrategy[Any]
    if kind is None:
        base = _any_json()
    elif "enum" in node:
        base = st.sampled_from(node["enum"])
    elif kind == "string" and "pattern" in node:
        base = st.from_regex(node["pattern"], fullmatch=True).filter(
            lambda s: node.get("minLength", 0) <= len(s) <= node.get("maxLength", 10**6))
    elif kind == "string":
        base = st.text(st.characters(codec="ascii"), min_size=node.get("minLength", 0),
                       max_size=min(node.get("maxLength", 12), 12))
    elif kind == "integer":
        base = st.integers(node.get("minimum", -(2**31)), node.get("maximum", 2**31))
    elif kind == "number":
        base = st.floats(allow_nan=False, allow_infinity=False)
    elif kind == "boolean":
        base = st.booleans()
    elif kind == "array":
        base = st.lists(_field(node["items"], depth + 1), min_size=node.get("minItems", 0),
                        max_size=min(node.get("maxItems", 3), 3))
    elif "properties" in node:
        props = node["properties"]
        required = node.get("required", [])
        base = st.fixed_dictionaries(
            {k: _field(props[k], depth + 1) for k in required},
            optional={k: _field(v, depth + 1) for k, v in props.items() if k not in required})
    else:
        base = st.dictionaries(st.text(st.characters(codec="ascii"), max_size=6),
                               _field(node["additionalProperties"], depth + 1), max_size=3)
    return st.one_of(st.none(), base) if node.get("nullable") else base


def _field(node: JSON, depth: int) -> st.SearchStrategy[Any]:
    """Mostly valid values, sometimes a wrong one: each generated job is near a boundary."""
    return st.one_of(_valid(node, depth), _wrong(node)) if depth else _valid(node, depth)


def _as_json_schema(node: JSON) -> JSON:
    """The OpenAPI node as JSON Schema, for jsonschema: nullable is a null type."""
    out = {k: v for k, v in node.items()
           if k not in ("nullable", "description", "properties", "items",
                        "additionalProperties") and not k.startswith("x-kubernetes")}
    if node.get("nullable") and "type" in node:
        out["type"] = [node["type"], "null"]
        if "enum" in node:
            out["enum"] = [*node["enum"], None]
    if "properties" in node:
        out["properties"] = {k: _as_json_schema(v) for k, v in node["properties"].items()}
    for key in ("items", "additionalProperties"):
        if isinstance(node.get(key), dict):
            out[key] = _as_json_schema(node[key])
    return out


def _pruned(value: Any, node: JSON) -> Any:
    """What the API server stores: a null in a field that is not nullable is dropped."""
    if isinstance(value, dict) and "properties" in node:
        props = node["properties"]
        return {k: _pruned(v, props[k]) if k in props else v for k, v in value.items()
                if not (v is None and k in props and not props[k].get("nullable")
                        and props[k].get("type"))}
    return value


SCHEMA = _spec_schema()
VALIDATOR = jsonschema.Draft202012Validator(_as_json_schema(SCHEMA))


@settings(max_examples=400, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(_valid(expected(Job, [])))
def test_the_api_server_and_the_model_accept_the_same_jobs(doc: JSON) -> None:
    """Jobs generated from the model's own types (so a bound missing from the CRD is
    probed too), judged by the CRD schema as the API server stores them and by the model."""
    stored = _pruned(doc, SCHEMA)
    crd_ok = VALIDATOR.is_valid(stored)
    try:
        Job.model_validate(stored, strict=True)  # as the operator does (validate_job)
    except ValidationError as exc:
        if crd_ok:
            where = [tuple(e["loc"]) for e in exc.errors()]
            assert all(any(loc[:len(p)] == p for p in MODEL_ONLY) for loc in where), \
                f"the CRD accepts what the model rejects at {where}: {exc}"
    else:
        errors = [f"{list(e.absolute_path)}: {e.message}" for e in VALIDATOR.iter_errors(stored)]
        assert crd_ok, f"the model accepts what the CRD rejects: {errors}"
