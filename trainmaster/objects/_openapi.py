"""A pydantic model's JSON Schema as a structural OpenAPI v3 schema, the form a
CustomResourceDefinition requires (Kueue generates its CRDs from its Go API types the same
way; here the types are the spec's pydantic models, so the TrainingJob CRD and the model
cannot drift apart).

What changes on the way, and why:

* `$ref`s are inlined: a CRD schema is self-contained.
* `X | None` (anyOf with null) becomes X with `nullable: true`: a structural schema allows
  no types inside anyOf.
* A union of other types (`"any" | list[int]`, a hyper-parameter's `str | int | float |
  bool`) cannot be said structurally: the node becomes untyped with
  `x-kubernetes-preserve-unknown-fields`, and the operator's validation of the model
  (status condition SpecValid=False, reason InvalidSpec) judges the value.
* Every object keeps unknown fields (`x-kubernetes-preserve-unknown-fields`), as the
  hand-written schema did: the model forbids them, and the operator reports a misspelt
  field by name instead of the API server pruning it without a word.
* Defaults are dropped: the API server would write them into stored objects, and the
  model already applies them (storing them would also make every default a field someone
  owns). `title` and `examples` are not OpenAPI v3.0 (examples) or only noise (title).
* `const` becomes a one-value `enum`; a numeric `exclusiveMinimum`/`exclusiveMaximum`
  (JSON Schema 2020-12) becomes the OpenAPI v3.0 boolean form.
"""

from __future__ import annotations

from typing import Any

from pydantic import BaseModel

JSON = dict[str, Any]

PRESERVE = "x-kubernetes-preserve-unknown-fields"
_DROPPED = frozenset({"title", "default", "examples", "additionalProperties", "$defs"})
_KEPT_SCALAR_KEYS = frozenset({
    "type", "description", "format", "enum", "pattern", "minimum", "maximum", "minLength",
    "maxLength", "minItems", "maxItems", "uniqueItems", "multipleOf", "minProperties",
    "maxProperties",
})


def openapi_schema(model: type[BaseModel]) -> JSON:
    """The model's schema (by alias, as validated) in structural OpenAPI v3 form."""
    raw = model.model_json_schema(by_alias=True, mode="validation")
    return _convert(raw, raw.get("$defs") or {})


def _resolve(node: JSON, defs: JSON) -> JSON:
    while "$ref" in node:
        name = node["$ref"].rsplit("/", 1)[-1]
        extra = {k: v for k, v in node.items() if k != "$ref"}
        node = {**defs[name], **extra}
    return node


def _convert(node: JSON, defs: JSON) -> JSON:
    node = _resolve(node, defs)
    if "anyOf" in node:
        return _union(node, defs)
    out: JSON = {}
    for key, value in node.items():
        if key in _DROPPED:
            continue
        if key == "const":
            out["enum"] = [value]
        elif key in ("exclusiveMinimum", "exclusiveMaximum"):
            bound = "minimum" if key == "exclusiveMinimum" else "maximum"
            out[bound], out[key] = value, True
        elif key == "properties":
            out["properties"] = {k: _convert(v, defs) for k, v in value.items()}
        elif key == "items":
            out["items"] = _convert(value, defs)
        elif key in _KEPT_SCALAR_KEYS or key == "required":
            out[key] = value
        else:
            raise ValueError(f"no OpenAPI form for JSON Schema keyword {key!r} in {node}")
    if node.get("type") == "object":
        extra = node.get("additionalProperties")
        if isinstance(extra, dict):  # a dict[str, X] field: a map
            out["additionalProperties"] = _convert(extra, defs)
        else:  # a model: keep what it does not know, for the operator to name
            out[PRESERVE] = True
    return out


def _union(node: JSON, defs: JSON) -> JSON:
    options = [_resolve(o, defs) for o in node["anyOf"]]
    rest = [o for o in options if o.get("type") != "null"]
    nullable = len(rest) < len(options)
    doc = {k: node[k] for k in ("description",) if k in node}
    # Several types are structurally inexpressible: the model judges the value.
    out = {**_convert(rest[0], defs), **doc} if len(rest) == 1 else {**doc, PRESERVE: True}
    if nullable:
        out["nullable"] = True
    return out
