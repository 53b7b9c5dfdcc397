"""Small modules with one job: every module of trainmaster over 500 lines says why in the
first lines of its docstring ("over 500 lines"), as tests/scheduler/test_layering.py
asks of the scheduler's."""

from __future__ import annotations

import ast
from pathlib import Path

import pytest

import trainmaster

PACKAGE = Path(trainmaster.__file__).parent
MAX_LINES = 500


@pytest.mark.parametrize("path", sorted(PACKAGE.rglob("*.py")), ids=lambda p: str(
    p.relative_to(PACKAGE)))
def test_a_module_is_small_or_says_why(path: Path) -> None:
    text = path.read_text()
    lines = text.count("\n")
    doc = (ast.get_docstring(ast.parse(text)) or "").splitlines()[:6]
    assert lines <= MAX_LINES or any("over 500 lines" in d.lower() for d in doc), (
        f"{path.relative_to(PACKAGE)}: {lines} lines, and its docstring's first lines "
        "give no reason: split it, or say why it is one module")
