"""The field-by-field reference of docs/spec.md, generated from the JSON Schema."""

from __future__ import annotations

import json
from typing import Any

from trainmaster.spec._load import json_schema


def _type(prop: dict[str, Any], defs: dict[str, Any]) -> str:
    if "$ref" in prop:
        return f"[{prop['$ref'].split('/')[-1]}](#{prop['$ref'].split('/')[-1].lower()})"
    if "const" in prop:
        return f"`{prop['const']}`"
    if "enum" in prop:
        return " \\| ".join(f"`{v}`" for v in prop["enum"])
    if "anyOf" in prop:
        return " or ".join(_type(p, defs) for p in prop["anyOf"] if p.get("type") != "null")
    kind = prop.get("type", "any")
    if kind == "array":
        return f"list of {_type(prop.get('items', {}), defs)}"
    if kind == "object" and "additionalProperties" in prop:
        return f"map of {_type(prop['additionalProperties'], defs)}"
    return str(kind)


def _constraints(prop: dict[str, Any]) -> str:
    parts = []
    for key, word in (
        ("minimum", "≥"),
        ("maximum", "≤"),
        ("minItems", "items ≥"),
        ("maxItems", "items ≤"),
        ("maxLength", "length ≤"),
    ):
        if key in prop:
            parts.append(f"{word} {prop[key]}")
    for sub in prop.get("anyOf", []):
        parts.extend(c for c in [_constraints(sub)] if c)
    if "pattern" in prop:
        parts.append("matches `" + prop["pattern"].replace("|", "\\|") + "`")
    return ", ".join(parts)


def _row(name: str, prop: dict[str, Any], required: set[str], defs: dict[str, Any]) -> str:
    default = (
        "required"
        if name in required
        else (f"`{json.dumps(prop['default'])}`" if "default" in prop else "—")
    )
    if len(default) > 60:
        default = "see the type"
    desc = prop.get("description", "").replace("\n", " ")
    extra = _constraints(prop)
    cell = f"{desc} ({extra})" if extra else desc
    return f"| `{name}` | {_type(prop, defs)} | {default} | {cell} |"


def _table(schema: dict[str, Any], defs: dict[str, Any]) -> list[str]:
    required = set(schema.get("required", []))
    lines = ["| field | type | default | meaning |", "| --- | --- | --- | --- |"]
    lines += [_row(n, p, required, defs) for n, p in schema.get("properties", {}).items()]
    return lines


def reference_markdown() -> str:
    schema = json_schema()
    defs = schema.get("$defs", {})
    out = [
        "## Field reference",
        "",
        "Generated from the JSON Schema by `trainmaster schema --markdown`; a test keeps",
        "it current.",
        "",
        "### ClusterSpec (the top level)",
        "",
        schema.get("description", ""),
        "",
        *_table(schema, defs),
    ]
    for name in sorted(defs):
        definition = defs[name]
        if "properties" not in definition:
            continue
        out += [
            "",
            f"### {name}",
            "",
            definition.get("description", ""),
            "",
            *_table(definition, defs),
        ]
    return "\n".join(out) + "\n"
