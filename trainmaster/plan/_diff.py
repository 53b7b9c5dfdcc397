"""Field-level differences between two spec documents (camelCase, defaults filled in)."""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any


@dataclass(frozen=True)
class Change:
    """One field whose value differs; None stands for "not set"."""

    path: str
    before: Any
    after: Any

    def to_json(self) -> dict[str, Any]:
        return {"path": self.path, "before": self.before, "after": self.after}


def _named(items: list[Any]) -> bool:
    """A list of mappings that each carry a distinct name (queues, datasets, switches)."""
    names = [i.get("name") for i in items if isinstance(i, Mapping)]
    return len(names) == len(items) and None not in names and len(set(names)) == len(names)


def flatten(value: Any, prefix: str = "") -> dict[str, Any]:
    """Leaf values by field path: ``restartPolicy.maxRestarts``, ``queues[research].gpuQuota``.

    Lists of named mappings are keyed by name so that inserting one entry does not show
    every later entry as changed; other lists of mappings by index; lists of plain values
    (a command line, a list of exit codes) are one value; an empty list has no leaves, so
    adding the first dataset does not also show `datasets: [] -> unset`.
    """
    out: dict[str, Any] = {}
    if isinstance(value, Mapping):  # an empty mapping has no fields: same as unset
        for key, item in value.items():
            out.update(flatten(item, f"{prefix}.{key}" if prefix else str(key)))
    elif isinstance(value, list) and not value:
        pass  # an empty list has no entries: the same as unset, as for a mapping
    elif isinstance(value, list) and all(isinstance(i, Mapping) for i in value):
        named = _named(value)
        for i, item in enumerate(value):
            out.update(flatten(item, f"{prefix}[{item['name'] if named else i}]"))
    else:
        out[prefix] = value
    return out


def diff(before: Mapping[str, Any], after: Mapping[str, Any]) -> list[Change]:
    """Every leaf that differs, in the order of `after` (then fields only `before` has)."""
    old, new = flatten(before), flatten(after)
    paths = list(new) + [p for p in old if p not in new]
    return [Change(p, old.get(p), new.get(p)) for p in paths if old.get(p) != new.get(p)]
