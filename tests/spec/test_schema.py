"""The committed JSON Schema is the one the model generates, and it documents every field."""

from __future__ import annotations

import json
from typing import Any

from tests.helpers import ROOT
from trainmaster.spec import json_schema

SCHEMA_FILE = ROOT / "schemas" / "cluster.schema.json"


def test_committed_schema_matches_the_model() -> None:
    committed = json.loads(SCHEMA_FILE.read_text())
    assert committed == json_schema(), "run: trainmaster schema > schemas/cluster.schema.json"


def test_schema_is_2020_12() -> None:
    assert json_schema()["$schema"] == "https://json-schema.org/draft/2020-12/schema"


def _undocumented(schema: dict[str, Any]) -> list[str]:
    missing = []
    for name, definition in schema.get("$defs", {}).items():
        for field, prop in definition.get("properties", {}).items():
            if "description" not in prop:
                missing.append(f"{name}.{field}")
    return missing


def test_every_field_is_documented() -> None:
    schema = json_schema()
    missing = _undocumented(schema)
    missing += [k for k, v in schema["properties"].items() if "description" not in v]
    assert missing == []


def test_docs_field_reference_is_current() -> None:
    from trainmaster.spec._docs import reference_markdown

    docs = (ROOT / "docs" / "spec.md").read_text()
    assert docs.endswith(reference_markdown()), (
        "regenerate the reference: keep the intro of docs/spec.md and append "
        "`trainmaster schema --markdown`")
