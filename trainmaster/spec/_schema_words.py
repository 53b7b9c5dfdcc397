"""A JSON Schema error said in the spec's words: what the field holds, what it must hold,
and what to write instead (never jsonschema's "is less than or equal to the minimum of 0").

``describe`` covers the keywords the generated schema uses (type, minimum and maximum,
exclusive ones too, lengths, item counts, enum, const, pattern, ...); ``required`` and
``additionalProperties`` need the whole object and stay with the loader.
"""

from __future__ import annotations

import difflib
import json
import re
from typing import Any

from trainmaster.api import BYTES_PATTERN

_PATTERN_HINTS = {
    "^[a-z0-9]([-a-z0-9]*[a-z0-9])?$": "use lowercase letters, digits and '-', starting and "
    "ending with a letter or digit (a DNS label)",
    "^/": "use an absolute path",
}

_TYPE_WORDS = {
    "array": "a list",
    "object": "a mapping (`key: value` lines or `{key: value}`)",
    "string": "text",
    "integer": "a whole number",
    "number": "a number",
    "boolean": "true or false",
    "null": "nothing (leave it out)",
}


def _value_words(value: Any) -> str:
    """`the number 8`, `the text "x"`, `a list`: what the user wrote, as they would say it."""
    if isinstance(value, bool):
        return f"`{str(value).lower()}`"
    if isinstance(value, (int, float)):
        return f"the number {value:g}" if isinstance(value, float) else f"the number {value}"
    if isinstance(value, str):
        return f"the text {json.dumps(value)}"
    if isinstance(value, list):
        return "a list"
    if isinstance(value, dict):
        return "a mapping"
    return "nothing" if value is None else repr(value)


def _number(value: Any) -> str:
    return f"{value:g}" if isinstance(value, float) else str(value)


def _default_hint(schema: dict[str, Any]) -> str:
    if "default" in schema and schema["default"] is not None:
        return f"; leaving it out gives {_number(schema['default'])}"
    return ""


def _list_example(field: str, schema: dict[str, Any], defs: dict[str, Any]) -> str:
    """`rails: [{subnet: ...}, ...]` for a list of mappings, `x: [a, b]` otherwise."""
    items = schema.get("items") or {}
    ref = items.get("$ref", "")
    item = defs.get(ref.rsplit("/", 1)[-1], {}) if ref else items
    required = item.get("required") or []
    if required:
        keys = ", ".join(f"{k}: ..." for k in required)
        return f"`{field}: [{{{keys}}}, ...]` (one mapping per entry)"
    return f"`{field}: [..., ...]` or one `- ` line per entry"


def _about(schema: dict[str, Any]) -> str:
    """The field's own description, first sentence, lower-cased: what it is for."""
    text = " ".join(str(schema.get("description") or "").split()).split(". ")[0].rstrip(".")
    if not text or len(text) > 90:
        return ""
    return f" ({text[0].lower()}{text[1:]})"


def quantity_hint(value: Any) -> str:
    """`10Gb` / `10GB` -> "did you mean `10Gi` (binary) or `10G` (decimal)?"."""
    match = re.fullmatch(r"([0-9]+(?:\.[0-9]+)?)\s*([KkMGTPE])(?:i?[bB])?", str(value).strip())
    if match is None:
        return "use a number with an optional suffix: Ki Mi Gi Ti Pi Ei (binary) or " \
            "k M G T P E (decimal), e.g. 512Gi"
    number, unit = match.groups()
    binary = unit.upper() + "i"
    decimal = "k" if unit in "Kk" else unit
    return f"did you mean `{number}{binary}` (binary) or `{number}{decimal}` (decimal)?"


def _type(field: str, value: Any, expected: Any, schema: dict[str, Any],
          defs: dict[str, Any]) -> str:
    kinds = expected if isinstance(expected, list) else [expected]
    wanted = " or ".join(_TYPE_WORDS.get(str(k), str(k)) for k in kinds)
    fix = ""
    if "array" in kinds:
        fix = f": write {_list_example(field, schema, defs)}"
    elif "object" in kinds:
        fix = f": write `{field}: {{...}}` with the fields docs/spec.md lists"
    elif kinds in (["integer"], ["number"]) and isinstance(value, str) \
            and re.fullmatch(r"-?[0-9]+(\.[0-9]+)?", value.strip()):
        fix = f": write it without quotes, `{field}: {value.strip()}`"
    elif kinds == ["string"] and value is not None:
        fix = f": quote it, e.g. `{field}: \"{value}\"`"
    elif kinds == ["boolean"]:
        fix = f": write `{field}: true` or `{field}: false`"
    return f"must be {wanted}{_about(schema)}, not {_value_words(value)}{fix}"


def describe(field: str, kind: str, shown: str, expected: Any, value: Any,
             schema: dict[str, Any], defs: dict[str, Any]) -> str | None:
    """A plain-words message for a schema keyword (the field's path is printed before it),
    or None for a keyword the generated schema never uses (jsonschema's wording then)."""
    match kind:
        case "type":
            return _type(field, value, expected, schema, defs)
        case "minimum":
            return (f"{shown} is less than the minimum {_number(expected)}: use "
                    f"{_number(expected)} or more{_default_hint(schema)}")
        case "exclusiveMinimum":
            return (f"{shown} is too small: `{field}`{_about(schema)} must be more than "
                    f"{_number(expected)}{_default_hint(schema)}")
        case "maximum":
            return (f"{shown} is more than the maximum {_number(expected)}: use "
                    f"{_number(expected)} or less{_default_hint(schema)}")
        case "exclusiveMaximum":
            return (f"{shown} is too large: `{field}` must be less than {_number(expected)}"
                    f"{_default_hint(schema)}")
        case "multipleOf":
            return f"{shown} is not a multiple of {_number(expected)}: use one"
        case "minItems":
            return (f"needs at least {expected} item(s){_about(schema)}: add "
                    f"{'one' if expected == 1 else 'more'}")
        case "maxItems":
            return f"takes at most {expected} item(s){_about(schema)}: remove some"
        case "uniqueItems":
            return "lists an item more than once: remove the duplicates"
        case "minLength":
            return "must not be empty" if expected == 1 else \
                f"{shown} is shorter than {expected} characters: use a longer value"
        case "maxLength":
            return f"{shown} is longer than {expected} characters: shorten it"
        case "minProperties":
            return f"needs at least {expected} field(s): add one"
        case "enum":
            close = difflib.get_close_matches(str(value), [str(e) for e in expected], n=1)
            hint = f": did you mean `{close[0]}`?" if close else ""
            return f"{shown} is not one of {', '.join(map(str, expected))}{hint}"
        case "const":
            return f"{shown} must be {expected}: write `{field}: {expected}`"
        case "pattern" if expected == BYTES_PATTERN:
            return f"{shown} is not a quantity: {quantity_hint(value)}"
        case "pattern":
            return f"{shown} does not match {expected}: " + _PATTERN_HINTS.get(
                str(expected), "see docs/spec.md")
        case "format":
            return f"{shown} is not a valid {expected}: see docs/spec.md for `{field}`"
        case "not" | "false":
            return f"{shown} is not allowed here: see docs/spec.md for `{field}`"
    return None
