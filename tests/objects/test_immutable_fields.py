"""The immutable-field table: which rendered objects a change forces to be replaced."""

from __future__ import annotations

import copy

from tests.helpers import stack_doc
from trainmaster.objects import (
    IMMUTABLE_FIELDS,
    all_objects,
    covers_immutable,
    immutable_fields,
    replacements,
)
from trainmaster.objects._immutable import group_kind
from trainmaster.spec import validate_data


def _objects(doc: dict[str, object]) -> list[dict[str, object]]:
    return all_objects(validate_data(doc, "test"))


def test_every_kind_in_the_table_is_rendered() -> None:
    """No dead entries: each listed kind is one the stacks render."""
    kinds = {group_kind(o) for name in ("dev", "prod-example", "bench")
             for o in _objects(stack_doc(name))}
    assert set(IMMUTABLE_FIELDS) - kinds == set()


def test_a_dataset_change_replaces_nothing() -> None:
    """The stack renders no warm-up Job (the operator creates them per node): a new source
    only updates the cache ConfigMap."""
    before = stack_doc("dev")
    after = copy.deepcopy(before)
    after["cache"]["datasets"][0]["source"] = "s3://datasets/tinystories-v2"
    assert list(replacements(_objects(before), _objects(after))) == []


def test_api_error_fields_within_an_immutable_field() -> None:
    binding = next(o for o in _objects(stack_doc("dev")) if o["kind"] == "RoleBinding")
    assert immutable_fields(binding) == ("roleRef",)
    assert covers_immutable(binding, "roleRef")
    assert covers_immutable(binding, "roleRef.name")
    assert not covers_immutable(binding, "roleRefX")
    assert not covers_immutable(binding, "subjects")
