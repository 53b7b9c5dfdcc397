"""Parse YAML or JSON into plain data while remembering the line of every field.

PyYAML's composer gives nodes with marks; we construct values ourselves so that each
path (a tuple of keys and indexes) maps to its 1-based line and column, and so that a
duplicated mapping key is an error rather than a silent overwrite.
"""

from __future__ import annotations

import json
from typing import Any

import yaml

from trainmaster.spec._errors import SpecReadError

try:  # the C parser is several times faster on large node lists
    from yaml import CSafeLoader as _Loader
except ImportError:  # pragma: no cover - depends on how PyYAML was built
    from yaml import SafeLoader as _Loader  # type: ignore[assignment]

Path = tuple[str | int, ...]
LineMap = dict[Path, tuple[int, int]]

MAX_DEPTH = 64
MAX_VALUES = 2_000_000  # stops alias bombs ("billion laughs") from expanding forever


class _NoDuplicatesLoader(_Loader):  # type: ignore[misc,valid-type]
    """The C parser, refusing duplicate keys (PyYAML would keep the last one silently)."""

    def construct_mapping(self, node: yaml.MappingNode, deep: bool = False) -> Any:
        keys = [k.value for k, _ in node.value if isinstance(k, yaml.ScalarNode)]
        if len(keys) != len(set(keys)):
            raise yaml.constructor.ConstructorError(None, None, "duplicate key", node.start_mark)
        return super().construct_mapping(node, deep=deep)


NOT_FAST = object()
"""fast_parse's answer when the document needs the careful path."""


def fast_parse(text: str) -> Any:
    """Data without line numbers, at C speed; NOT_FAST where parse_document must decide.

    Most specs are valid, and line numbers only matter in error messages, so the loader
    tries this first and re-parses with parse_document only when something is wrong.
    Documents with anchors or aliases always take the careful path (alias-bomb guard).
    """
    if "&" in text or "*" in text:
        return NOT_FAST
    try:
        return yaml.load(text, Loader=_NoDuplicatesLoader)
    except (yaml.YAMLError, RecursionError, ValueError, OverflowError):
        return NOT_FAST


def parse_document(text: str, source: str) -> tuple[Any, LineMap]:
    """Return (data, line map) for a YAML or JSON document; raise SpecReadError."""
    if source.endswith(".json"):
        try:
            return json.loads(text), {}
        except json.JSONDecodeError as exc:
            raise SpecReadError(
                source, f"not valid JSON: {exc.msg}", exc.lineno, exc.colno
            ) from None
        except RecursionError:
            raise SpecReadError(source, f"nested deeper than {MAX_DEPTH} levels") from None
    try:
        node = yaml.compose(text, Loader=_Loader)
    except yaml.MarkedYAMLError as exc:
        mark = exc.problem_mark
        line, col = (mark.line + 1, mark.column + 1) if mark else (None, None)
        raise SpecReadError(source, f"not valid YAML: {exc.problem}", line, col) from None
    except yaml.YAMLError as exc:
        raise SpecReadError(source, f"not valid YAML: {exc}") from None
    except RecursionError:
        raise SpecReadError(source, f"nested deeper than {MAX_DEPTH} levels") from None
    if node is None:
        return None, {}
    lines: LineMap = {}
    constructor = yaml.SafeLoader("")  # used only for its scalar constructors
    return _build(node, (), lines, constructor, source), lines


def _build(node: yaml.Node, path: Path, lines: LineMap, ctor: yaml.SafeLoader, source: str) -> Any:
    if len(lines) > MAX_VALUES:
        raise SpecReadError(source, f"more than {MAX_VALUES} values (an alias bomb?)")
    if len(path) > MAX_DEPTH:
        raise SpecReadError(
            source,
            f"nested deeper than {MAX_DEPTH} levels",
            node.start_mark.line + 1,
            node.start_mark.column + 1,
        )
    lines[path] = (node.start_mark.line + 1, node.start_mark.column + 1)
    if isinstance(node, yaml.MappingNode):
        ctor.flatten_mapping(node)  # resolves YAML merge keys (<<)
        result: dict[str, Any] = {}
        for key_node, value_node in node.value:
            if not isinstance(key_node, yaml.ScalarNode):
                raise SpecReadError(
                    source,
                    "mapping keys must be plain strings",
                    key_node.start_mark.line + 1,
                    key_node.start_mark.column + 1,
                )
            key = str(ctor.construct_object(key_node))
            if key in result:
                raise SpecReadError(
                    source,
                    f"duplicate key {key!r}",
                    key_node.start_mark.line + 1,
                    key_node.start_mark.column + 1,
                )
            result[key] = _build(value_node, (*path, key), lines, ctor, source)
        return result
    if isinstance(node, yaml.SequenceNode):
        return [_build(item, (*path, i), lines, ctor, source) for i, item in enumerate(node.value)]
    try:
        value = ctor.construct_object(node)
    except yaml.constructor.ConstructorError as exc:
        raise SpecReadError(
            source,
            f"cannot read value: {exc.problem}",
            node.start_mark.line + 1,
            node.start_mark.column + 1,
        ) from None
    except (ValueError, OverflowError) as exc:
        raise SpecReadError(
            source,
            f"cannot read value: {exc}",
            node.start_mark.line + 1,
            node.start_mark.column + 1,
        ) from None
    return value
