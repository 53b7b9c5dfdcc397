"""The scheduler package's layering, read from the source with ``ast``.

Every ``import`` statement counts, wherever it is: module level, under
``if TYPE_CHECKING:`` and inside functions. A TYPE_CHECKING import does not run, but it
is still a dependency a reader and mypy must follow, and a cycle that only works because
one edge sits under TYPE_CHECKING is what this test exists to stop.

The **core** is the placement engine: pure computation over value types that a
simulator, a benchmark or a what-if run uses without a cluster. It may import only the
standard library and other core modules. Everything else in the package is either
runtime (network, processes, asyncio: ``_binder``, ``_loop``, ``_leader``,
``_metrics``, ``_service``, ``_events``, ``_report``, ``_tasks``, ``cli``; the API client itself is
``trainmaster.kubeclient``) or an adapter that turns API objects and config
into core values (``_convert``, ``_config``, ``_gangs``, ``_cache``, ``_keys``). Those
may import the core; the core never imports them.
"""

from __future__ import annotations

import ast
import subprocess
import sys
from collections.abc import Iterator, Mapping
from pathlib import Path

import pytest

import trainmaster.scheduler

PACKAGE = "trainmaster.scheduler"
PACKAGE_DIR = Path(trainmaster.scheduler.__file__).parent

# Core module -> (layer, job). A core module imports only core modules of lower layers.
CORE: Mapping[str, tuple[int, str]] = {
    "_model": (0, "value types: nodes, pods, gangs, topology constraints"),
    "_status": (0, "the one result type plugins return"),
    "_contracts": (1, "extension-point protocols"),
    "_filters": (2, "filter plugins and their pure predicates"),
    "_score": (2, "the score plugin"),
    "_dataset_locality": (3, "the default score plugin: best fit plus dataset locality"),
    "_coscheduling": (2, "gang manager and the coscheduling plugin"),
    "_quota": (1, "queue quotas, borrowing and the per-queue GPU ledger"),
    "_snapshot": (3, "cluster state, assume/forget/confirm, the read API"),
    "_framework": (4, "plugin registry and profiles"),
    "_blocked": (4, "a cycle's reserved nodes, kept incrementally"),
    "_placement": (5, "one gang into the smallest domain"),
    "_plan": (5, "joint leaf assignment for a burst of gangs"),
    "_fragmentation": (5, "how scattered free GPUs are"),
    "_queue": (6, "queue order, cycles, anti-starvation"),
    "_preemption": (6, "which whole gangs to evict so a pending gang fits"),
}

# Named in failures so the reason is plain; the stdlib-only rule already covers them.
RUNTIME = frozenset(
    {
        "_binder", "_loop", "_leader", "_metrics", "_service", "_events", "_report", "cli",
        "_preempt", "_tasks",
    }
)  # fmt: skip
CLIENTS = frozenset(
    {"aiohttp", "kubernetes", "kubernetes_asyncio", "prometheus_client", "yaml", "kopf"}
)


def _modules() -> dict[str, Path]:
    return {p.stem: p for p in sorted(PACKAGE_DIR.glob("*.py"))}


def imports_of(path: Path, package: str = PACKAGE) -> Iterator[tuple[int, str]]:
    """(line, absolute module name) for every import in ``path``, at any depth. For
    ``from X import a, b`` both ``X.a`` and ``X.b`` are yielded when X is ``package``
    itself, since ``a`` may be a submodule."""
    tree = ast.parse(path.read_text(), str(path))
    for node in ast.walk(tree):
        if isinstance(node, ast.Import):
            for alias in node.names:
                yield node.lineno, alias.name
        elif isinstance(node, ast.ImportFrom):
            if node.level:
                base = package.split(".")
                # "." is the package holding the module (for __init__, the package itself).
                up = node.level - 1
                base = base[: len(base) - up] if up else base
                target = ".".join([*base, node.module] if node.module else base)
            else:
                target = node.module or ""
            if target == "__future__":
                continue
            if target == package:
                for alias in node.names:
                    yield node.lineno, f"{package}.{alias.name}"
            else:
                yield node.lineno, target


def local_graph(package: str = PACKAGE) -> dict[str, set[str]]:
    """Module stem -> stems it imports inside the package (``__init__`` for the package
    itself or a name that is not a submodule)."""
    modules = _modules()
    graph: dict[str, set[str]] = {m: set() for m in modules}
    for stem, path in modules.items():
        for _, name in imports_of(path, package):
            if name != package and not name.startswith(package + "."):
                continue
            rest = name[len(package) + 1 :].split(".")[0] if name != package else ""
            target = rest if rest in modules else "__init__"
            if target != stem:
                graph[stem].add(target)
    return graph


def find_cycle(graph: Mapping[str, set[str]]) -> list[str] | None:
    """One import cycle as a path ``[a, b, ..., a]``, or None."""
    WHITE, GREY, BLACK = 0, 1, 2
    color = dict.fromkeys(graph, WHITE)
    stack: list[str] = []

    def visit(node: str) -> list[str] | None:
        color[node] = GREY
        stack.append(node)
        for nxt in sorted(graph.get(node, ())):
            if color.get(nxt, WHITE) == GREY:
                return [*stack[stack.index(nxt) :], nxt]
            if color.get(nxt, WHITE) == WHITE:
                found = visit(nxt)
                if found:
                    return found
        stack.pop()
        color[node] = BLACK
        return None

    for start in sorted(graph):
        if color[start] == WHITE:
            found = visit(start)
            if found:
                return found
    return None


# --- the rules ------------------------------------------------------------------------


def test_core_set_is_current() -> None:
    """A renamed or deleted core module must be renamed here too, not silently dropped."""
    assert set(CORE) <= set(_modules()), set(CORE) - set(_modules())


@pytest.mark.parametrize("stem", sorted(CORE))
def test_core_imports_only_stdlib_and_core(stem: str) -> None:
    bad: list[str] = []
    for line, name in imports_of(_modules()[stem]):
        if name.startswith(PACKAGE + "."):
            target = name[len(PACKAGE) + 1 :].split(".")[0]
            if target not in CORE:
                kind = "runtime" if target in RUNTIME else "non-core"
                bad.append(f"line {line}: {name} ({kind})")
            elif CORE[target][0] >= CORE[stem][0]:
                bad.append(f"line {line}: {name} (layer {CORE[target][0]}, not below)")
        elif name.split(".")[0] not in sys.stdlib_module_names:
            kind = "Kubernetes/HTTP client" if name.split(".")[0] in CLIENTS else "third-party"
            bad.append(f"line {line}: {name} ({kind})")
    assert not bad, f"core module {stem} imports outside the core: {bad}"


def test_importing_the_package_loads_no_runtime() -> None:
    """In a fresh interpreter: the package's eager imports (``__init__``) stay core."""
    code = "import sys, trainmaster.scheduler; print('\\n'.join(sorted(sys.modules)))"
    loaded = set(
        subprocess.run(
            [sys.executable, "-c", code], check=True, capture_output=True, text=True
        ).stdout.split()
    )
    ours = {m[len(PACKAGE) + 1 :] for m in loaded if m.startswith(PACKAGE + ".")}
    assert ours <= set(CORE), sorted(ours - set(CORE))
    assert not {m.split(".")[0] for m in loaded} & CLIENTS


def test_no_import_cycle_in_the_package() -> None:
    cycle = find_cycle(local_graph())
    assert cycle is None, "import cycle: " + " -> ".join(cycle or [])


# --- the checker itself ---------------------------------------------------------------


def test_graph_sees_every_kind_of_import() -> None:
    graph = local_graph()
    assert "_snapshot" in graph["_placement"]  # module level, relative
    assert "_loop" in graph["__init__"]  # under TYPE_CHECKING
    assert "_cache" in graph["_binder"]


def test_imports_of_reads_type_checking_and_function_imports(tmp_path: Path) -> None:
    src = tmp_path / "_mod.py"
    src.write_text(
        "from typing import TYPE_CHECKING\n"
        "from . import _a\n"
        "if TYPE_CHECKING:\n"
        "    from ._b import B\n"
        "def f():\n"
        "    import aiohttp\n"
    )
    names = {n for _, n in imports_of(src, "pkg.sub")}
    assert names == {"typing", "pkg.sub._a", "pkg.sub._b", "aiohttp"}


def test_find_cycle_reports_the_old_triangle() -> None:
    # The cycle this package had: framework -> gang -> snapshot -(TYPE_CHECKING)-> framework.
    graph = {"_framework": {"_gang", "_snapshot"}, "_gang": {"_snapshot"},
             "_snapshot": {"_framework"}}  # fmt: skip
    assert find_cycle(graph) == ["_framework", "_gang", "_snapshot", "_framework"]
    assert find_cycle({"a": {"b"}, "b": set()}) is None
