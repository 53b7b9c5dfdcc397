"""Field-level diffs of spec documents, and how values show in the Markdown tables."""

from __future__ import annotations

from trainmaster.plan import Change, diff, flatten
from trainmaster.plan._render import code, value


def test_named_lists_are_keyed_by_name() -> None:
    doc = {"queues": [{"name": "a", "gpuQuota": 8}, {"name": "b", "gpuQuota": None}]}
    assert flatten(doc) == {
        "queues[a].gpuQuota": 8,
        "queues[a].name": "a",
        "queues[b].gpuQuota": None,
        "queues[b].name": "b",
    }


def test_inserting_a_named_entry_changes_only_that_entry() -> None:
    before = {"queues": [{"name": "a", "priority": 1}, {"name": "c", "priority": 3}]}
    after = {
        "queues": [
            {"name": "a", "priority": 1},
            {"name": "b", "priority": 2},
            {"name": "c", "priority": 3},
        ]
    }
    assert diff(before, after) == [
        Change("queues[b].name", None, "b"),
        Change("queues[b].priority", None, 2),
    ]


def test_unnamed_lists_by_index_and_plain_lists_whole() -> None:
    before = {"rails": [{"subnet": "10.0.0.0/20"}], "command": ["python", "a.py"]}
    after = {"rails": [{"subnet": "10.0.16.0/20"}], "command": ["python", "b.py"]}
    assert diff(before, after) == [
        Change("rails[0].subnet", "10.0.0.0/20", "10.0.16.0/20"),
        Change("command", ["python", "a.py"], ["python", "b.py"]),
    ]


def test_unset_and_null_are_the_same() -> None:
    assert diff({"a": {"b": None}}, {"a": {}}) == []
    assert diff({"env": {}}, {"env": {"X": "1"}}) == [Change("env.X", None, "1")]


def test_values_are_safe_in_a_table_cell() -> None:
    assert code("a|b`c") == "`a\\|b'c`"
    assert value(None) == "unset"
    assert value(["bash", "-c", "x | y"]) == '`["bash", "-c", "x \\| y"]`'
    long = value("x" * 200)
    assert len(long) < 90 and long.endswith("…`")
