"""No package of trainmaster has an import cycle among its own modules (read with ``ast``,
so imports under TYPE_CHECKING and inside functions count too)."""

from __future__ import annotations

import ast
from pathlib import Path

import trainmaster

ROOT = Path(trainmaster.__file__).parent


def _packages() -> list[Path]:
    return [p for p in [ROOT, *ROOT.rglob("*")] if p.is_dir() and (p / "__init__.py").exists()]


def _dotted(folder: Path) -> str:
    return ".".join(("trainmaster", *folder.relative_to(ROOT).parts))


def _edges(package: Path) -> dict[str, set[str]]:
    """Module -> modules of the same package it imports (the package itself left out)."""
    name = _dotted(package)
    modules = {(name if f.stem == "__init__" else f"{name}.{f.stem}"): f
               for f in package.glob("*.py")}
    edges: dict[str, set[str]] = {m: set() for m in modules}
    for module, path in modules.items():
        here = module.split(".") if path.stem == "__init__" else module.split(".")[:-1]
        for node in ast.walk(ast.parse(path.read_text())):
            targets: list[str] = []
            if isinstance(node, ast.ImportFrom):
                base = node.module or ""
                if node.level:
                    parts = here[: len(here) - (node.level - 1)]
                    base = ".".join(parts + ([node.module] if node.module else []))
                targets = [base, *(f"{base}.{a.name}" for a in node.names)]
            elif isinstance(node, ast.Import):
                targets = [a.name for a in node.names]
            for target in targets:
                while target and target not in modules:
                    target = target.rpartition(".")[0]
                if target and target not in (module, name):
                    edges[module].add(target)
    return edges


def _cycles(edges: dict[str, set[str]]) -> list[list[str]]:
    found: list[list[str]] = []
    state: dict[str, int] = {}
    stack: list[str] = []

    def visit(module: str) -> None:
        state[module] = 1
        stack.append(module)
        for other in sorted(edges[module]):
            if state.get(other) == 1:
                found.append([*stack[stack.index(other):], other])
            elif other not in state:
                visit(other)
        stack.pop()
        state[module] = 2

    for module in sorted(edges):
        if module not in state:
            visit(module)
    return found


def test_no_package_has_an_import_cycle() -> None:
    cycles = [" -> ".join(c) for p in _packages() for c in _cycles(_edges(p))]
    assert not cycles, cycles


def test_the_check_sees_a_cycle() -> None:
    assert _cycles({"a": {"b"}, "b": {"c"}, "c": {"a"}}) == [["a", "b", "c", "a"]]
    assert _cycles({"a": {"b"}, "b": set()}) == []
