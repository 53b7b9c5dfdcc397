"""The scheduler package's layering, read from the source with ``ast``.

Every ``import`` statement counts, wherever it is: module level, under
``if TYPE_CHECKING:`` and inside functions. A TYPE_CHECKING import does not run, but it
is still a dependency a reader and mypy must follow.

Folders, lowest first; each may import only the standard library, itself and the
folders below it (and ``_keys``, the wire keys, which imports nothing):

* ``framework``: contracts only;
* ``state``: the cluster state and its indexes;
* ``plugins``: one module per plugin (framework and state interfaces only; a plugin never
  imports another plugin: ``plugins/__init__.py`` holds the registration lines);
* ``placement``: the engine the cycle drives;
* ``runtime``: may import all. Its pure modules (the queue, ``GangScheduler``, the
  cycle, the ports) are hosted by the simulator too and import no runtime module that
  talks to the API server, and no client library.

Outside the package, code under ``trainmaster/`` imports only ``trainmaster.scheduler``
itself (its ``__all__``) or ``trainmaster.scheduler.cli``, never a module inside.
Every module is at most ``MAX_LINES`` lines unless its docstring's first lines say why.
"""

from __future__ import annotations

import ast
import subprocess
import sys
from collections.abc import Iterator, Mapping
from pathlib import Path

import pytest

import trainmaster
import trainmaster.scheduler

PACKAGE = "trainmaster.scheduler"
PACKAGE_DIR = Path(trainmaster.scheduler.__file__).parent
LAYERS: Mapping[str, int] = {"framework": 0, "state": 1, "plugins": 2, "placement": 3,
                             "runtime": 4}  # fmt: skip
PURE_RUNTIME = frozenset({"runtime", "runtime.queue", "runtime.gang_scheduler",
                          "runtime.cycle", "runtime.ports", "runtime.retry"})  # fmt: skip
ANYWHERE = frozenset({"_keys"})
CLIENTS = frozenset(
    {"aiohttp", "kubernetes", "kubernetes_asyncio", "prometheus_client", "yaml", "kopf"}
)
MAX_LINES = 500


def _modules() -> dict[str, Path]:
    """Dotted name inside the package (``framework.model``; ``plugins`` for a folder's
    ``__init__``; ``__init__`` for the package's own) -> file."""
    out: dict[str, Path] = {}
    for path in sorted(PACKAGE_DIR.rglob("*.py")):
        parts = path.relative_to(PACKAGE_DIR).with_suffix("").parts
        if parts[-1] == "__init__" and len(parts) > 1:
            parts = parts[:-1]
        out[".".join(parts)] = path
    return out


def imports_of(path: Path, module: str) -> Iterator[tuple[int, str]]:
    """(line, absolute module name) for every import in ``path`` (the module
    ``module``, dotted and absolute), at any depth. For ``from X import a`` both
    ``X`` and ``X.a`` are yielded, since ``a`` may be a submodule."""
    is_pkg = path.name == "__init__.py"
    here = module.split(".") if is_pkg else module.split(".")[:-1]
    tree = ast.parse(path.read_text(), str(path))
    for node in ast.walk(tree):
        if isinstance(node, ast.Import):
            for alias in node.names:
                yield node.lineno, alias.name
        elif isinstance(node, ast.ImportFrom):
            if node.level:
                base = here[: len(here) - (node.level - 1)]
                target = ".".join([*base, node.module] if node.module else base)
            else:
                target = node.module or ""
            if target == "__future__":
                continue
            yield node.lineno, target
            for alias in node.names:
                yield node.lineno, f"{target}.{alias.name}"


def _local(name: str, modules: Mapping[str, Path]) -> str | None:
    """The package module ``name`` refers to (longest known prefix), or None."""
    if not name.startswith(PACKAGE + "."):
        return "__init__" if name == PACKAGE else None
    rest = name[len(PACKAGE) + 1 :]
    while rest and rest not in modules:
        rest = rest.rpartition(".")[0]
    return rest or "__init__"


def local_graph() -> dict[str, set[str]]:
    modules = _modules()
    graph: dict[str, set[str]] = {m: set() for m in modules}
    for mod, path in modules.items():
        full = PACKAGE if mod == "__init__" else f"{PACKAGE}.{mod}"
        for _, name in imports_of(path, full):
            target = _local(name, modules)
            if target is not None and target != mod:
                graph[mod].add(target)
    return graph


def find_cycle(graph: Mapping[str, set[str]]) -> list[str] | None:
    """One import cycle as a path ``[a, b, ..., a]``, or None."""
    color: dict[str, int] = dict.fromkeys(graph, 0)
    stack: list[str] = []

    def visit(node: str) -> list[str] | None:
        color[node] = 1
        stack.append(node)
        for nxt in sorted(graph.get(node, ())):
            if color.get(nxt, 0) == 1:
                return [*stack[stack.index(nxt) :], nxt]
            if color.get(nxt, 0) == 0:
                found = visit(nxt)
                if found:
                    return found
        stack.pop()
        color[node] = 2
        return None

    for start in sorted(graph):
        if color[start] == 0:
            found = visit(start)
            if found:
                return found
    return None


def _folder(mod: str) -> str:
    return mod.split(".")[0]


def _is_core(mod: str) -> bool:
    folder = _folder(mod)
    return folder in LAYERS and (folder != "runtime" or mod in PURE_RUNTIME)


# --- the rules ------------------------------------------------------------------------


@pytest.mark.parametrize("mod", sorted(m for m in _modules() if _folder(m) in LAYERS))
def test_folders_import_only_downwards(mod: str) -> None:
    modules = _modules()
    full = f"{PACKAGE}.{mod}"
    folder = _folder(mod)
    bad: list[str] = []
    for line, name in imports_of(modules[mod], full):
        target = _local(name, modules)
        if target is None:
            top = name.split(".")[0]
            if _is_core(mod) and top not in sys.stdlib_module_names:
                bad.append(f"line {line}: {name} (a core module imports only the stdlib)")
            continue
        if target == mod or target in ANYWHERE:
            continue
        other = _folder(target)
        if other not in LAYERS:
            bad.append(f"line {line}: {name} (the package's {target})")
        elif LAYERS[other] > LAYERS[folder]:
            bad.append(f"line {line}: {name} ({other} is above {folder})")
        elif folder == "plugins" and other == "plugins" and mod != "plugins":
            bad.append(f"line {line}: {name} (a plugin imports no other plugin)")
        elif _is_core(mod) and other == "runtime" and target not in PURE_RUNTIME:
            bad.append(f"line {line}: {name} (API-facing runtime)")
    assert not bad, f"{mod}: {bad}"


def test_nothing_outside_imports_the_package_internals() -> None:
    root = Path(trainmaster.__file__).parent
    bad: list[str] = []
    for path in sorted(root.rglob("*.py")):
        if PACKAGE_DIR in path.parents:
            continue
        rel = path.relative_to(root.parent).with_suffix("")
        for line, name in imports_of(path, ".".join(rel.parts)):
            if name.startswith(PACKAGE + ".") and name != f"{PACKAGE}.cli":
                if name[len(PACKAGE) + 1 :] in trainmaster.scheduler.__all__:
                    continue  # ``from trainmaster.scheduler import X``
                bad.append(f"{rel}:{line}: {name}")
    assert not bad, bad


def test_importing_the_package_loads_no_runtime() -> None:
    """In a fresh interpreter: the package's eager imports stay core, no client."""
    code = "import sys, trainmaster.scheduler; print('\\n'.join(sorted(sys.modules)))"
    loaded = set(
        subprocess.run(
            [sys.executable, "-c", code], check=True, capture_output=True, text=True
        ).stdout.split()
    )
    ours = {m[len(PACKAGE) + 1 :] for m in loaded if m.startswith(PACKAGE + ".")}
    assert {m for m in ours if not (_is_core(m) or m in ANYWHERE)} == set()
    assert not {m.split(".")[0] for m in loaded} & CLIENTS


def test_the_scheduler_process_loads_no_spec_model() -> None:
    """The entry point and the whole runtime start without pydantic (the spec model cost
    a new scheduler 0.4 s of start-up): config, keys and parsers come from trainmaster.api."""
    code = ("import sys, trainmaster.scheduler.cli, trainmaster.scheduler.runtime.service; "
            "print(' '.join(sorted(m for m in sys.modules "
            "if m.startswith(('pydantic', 'trainmaster.spec', 'trainmaster.objects')))))")
    loaded = subprocess.run([sys.executable, "-c", code], check=True, capture_output=True,
                            text=True).stdout.split()
    assert loaded == []


def test_no_import_cycle_in_the_package() -> None:
    cycle = find_cycle(local_graph())
    assert cycle is None, "import cycle: " + " -> ".join(cycle or [])


@pytest.mark.parametrize("mod", sorted(_modules()))
def test_modules_are_small_or_say_why(mod: str) -> None:
    path = _modules()[mod]
    lines = path.read_text().count("\n")
    doc = (ast.get_docstring(ast.parse(path.read_text())) or "").splitlines()[:6]
    assert lines <= MAX_LINES or any("over 500 lines" in d.lower() for d in doc), (
        f"{path.relative_to(PACKAGE_DIR)}: {lines} lines, and its docstring's first lines "
        "give no reason"
    )


# --- the checker itself ---------------------------------------------------------------


def test_graph_sees_every_kind_of_import() -> None:
    graph = local_graph()
    assert "state" in graph["placement.search"]  # relative, the folder's __init__
    assert "runtime.loop" in graph["__init__"]  # under TYPE_CHECKING
    assert "runtime.cache" in graph["runtime.binder"]


def test_imports_of_reads_type_checking_and_function_imports(tmp_path: Path) -> None:
    src = tmp_path / "mod.py"
    src.write_text(
        "from typing import TYPE_CHECKING\n"
        "from . import a\n"
        "if TYPE_CHECKING:\n"
        "    from ..b import B\n"
        "def f():\n"
        "    import aiohttp\n"
    )
    names = {n for _, n in imports_of(src, "pkg.sub.mod")}
    assert {"pkg.sub.a", "pkg.b", "pkg.b.B", "aiohttp"} <= names


def test_find_cycle_reports_a_triangle() -> None:
    graph = {"a": {"b", "c"}, "b": {"c"}, "c": {"a"}}
    assert find_cycle(graph) == ["a", "b", "c", "a"]
    assert find_cycle({"a": {"b"}, "b": set()}) is None
