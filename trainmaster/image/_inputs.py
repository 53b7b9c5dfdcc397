"""What an image is built from, and the digest that names its cache entry.

The digest covers every input that changes the image: the project's sources as they are in
the working tree (committed or not), the lock file, the examples, the Debian suite and
packages, the runtime requirement set and this builder's own recipe version. An unchanged
tree maps to the same digest, so `trainmaster image build` reuses the archive it built.
"""

from __future__ import annotations

import hashlib
import json
import sys
import tomllib
from collections.abc import Iterator
from dataclasses import dataclass, field
from pathlib import Path

# Bump when the way the image is assembled changes, so old cache entries are not reused.
RECIPE_VERSION = "1"
DEBIAN_SUITE = "bookworm"
DEBIAN_MIRRORS = (
    f"deb http://deb.debian.org/debian {DEBIAN_SUITE} main",
    f"deb http://deb.debian.org/debian {DEBIAN_SUITE}-updates main",
    f"deb http://deb.debian.org/debian-security {DEBIAN_SUITE}-security main",
)
# Debian's python3 is the interpreter of the image's venv (bash, for the launch script, is
# in every Debian base); numpy's wheel links libstdc++ (found by the image tests: without it
# `import numpy` fails); ca-certificates lets clients verify TLS servers other than the
# in-cluster API server, whose CA comes with the ServiceAccount token.
DEBIAN_PACKAGES = ("python3", "libstdc++6", "ca-certificates")
PYTHON_VERSION = "3.11"  # bookworm's python3; the wheels are chosen for it
# Deploy-time dependencies: `pulumi up` runs from a workstation or CI, never in-cluster, and
# the local control plane's certificates are made on the host. Leaving them out saves about
# 100 MB (pulumi-kubernetes alone is 64 MB installed, plus grpcio).
DEPLOY_ONLY = frozenset({"pulumi", "pulumi-kubernetes", "pulumi-policy", "cryptography"})
EXAMPLES_EXTRA = "examples"  # the optional dependencies of examples/, installed in the image
SOURCE_DIRS = ("trainmaster", "components", "policies")
SOURCE_FILES = ("pyproject.toml", "README.md")
LOCK_FILE = "uv.lock"
EXAMPLES_DIR = "examples"
_SKIP_PARTS = {"__pycache__", ".mypy_cache", ".pytest_cache", ".ruff_cache"}


def canonical(name: str) -> str:
    """A distribution name as PEP 503 compares them."""
    return "-".join(name.lower().replace("_", "-").replace(".", "-").split("-"))


def _requirement_name(requirement: str) -> str:
    for i, char in enumerate(requirement):
        if not (char.isalnum() or char in "-_."):
            return canonical(requirement[:i])
    return canonical(requirement)


@dataclass(frozen=True)
class Inputs:
    """Everything an image build reads, resolved from a source tree."""

    root: Path
    version: str
    requirements: tuple[str, ...]
    """The runtime requirement set: the project's dependencies less DEPLOY_ONLY, plus the
    `examples` extra."""
    constraints: tuple[str, ...] = field(default=())
    """`name==version` pins from the lock file, if the tree has one."""

    def source_files(self) -> Iterator[Path]:
        """The files the wheel and the image are made of, in a stable order."""
        for name in SOURCE_FILES:
            if (self.root / name).is_file():
                yield self.root / name
        for top in (*SOURCE_DIRS, EXAMPLES_DIR):
            base = self.root / top
            if not base.is_dir():
                continue
            for path in sorted(base.rglob("*")):
                if path.is_file() and not _SKIP_PARTS.intersection(path.parts) \
                        and path.suffix not in (".pyc", ".pyo"):
                    yield path
        if (self.root / LOCK_FILE).is_file():
            yield self.root / LOCK_FILE

    def digest(self) -> str:
        """sha256 over the recipe and every input file (path and content)."""
        h = hashlib.sha256()
        recipe = {
            "recipe": RECIPE_VERSION,
            "suite": DEBIAN_SUITE,
            "mirrors": DEBIAN_MIRRORS,
            "packages": DEBIAN_PACKAGES,
            "python": PYTHON_VERSION,
            "requirements": self.requirements,
            "constraints": self.constraints,
        }
        h.update(json.dumps(recipe, sort_keys=True).encode())
        for path in self.source_files():
            rel = path.relative_to(self.root).as_posix()
            h.update(f"\0{rel}\0{path.stat().st_size}\0".encode())
            h.update(path.read_bytes())
        return h.hexdigest()


def lock_constraints(lock: Path) -> tuple[str, ...]:
    """`name==version` for every registry package of a uv.lock (the project itself, an
    editable source, is not pinned)."""
    data = tomllib.loads(lock.read_text())
    versions: dict[str, set[str]] = {}
    for package in data.get("package", []):
        if "registry" in package.get("source", {}):
            versions.setdefault(canonical(package["name"]), set()).add(package["version"])
    # A package locked at different versions for different Pythons (a forked resolution)
    # is left to pip's resolver rather than pinned twice.
    return tuple(sorted(f"{name}=={next(iter(found))}" for name, found in versions.items()
                        if len(found) == 1))


def read_inputs(root: Path) -> Inputs:
    """The inputs of the tree at `root` (a checkout of trainmaster)."""
    pyproject = root / "pyproject.toml"
    if not pyproject.is_file():
        from trainmaster.image._errors import ImageError

        raise ImageError(f"{root} has no pyproject.toml: pass --source, the root of a "
                         "trainmaster checkout")
    project = tomllib.loads(pyproject.read_text())["project"]
    runtime = [r for r in project.get("dependencies", [])
               if _requirement_name(r) not in DEPLOY_ONLY]
    lock = root / LOCK_FILE
    return Inputs(
        root=root,
        version=str(project["version"]),
        requirements=(*runtime,
                      *project.get("optional-dependencies", {}).get(EXAMPLES_EXTRA, [])),
        constraints=lock_constraints(lock) if lock.is_file() else (),
    )


def main(argv: list[str]) -> int:
    """`python3 trainmaster/image/_inputs.py ROOT requirements|constraints`: the same
    runtime requirement set and pins for a Containerfile build, which runs before
    trainmaster is installed (this module imports only the standard library)."""
    if len(argv) != 2 or argv[1] not in ("requirements", "constraints"):
        print("usage: _inputs.py ROOT requirements|constraints", file=sys.stderr)
        return 2
    inputs = read_inputs(Path(argv[0]))
    lines = inputs.requirements if argv[1] == "requirements" else inputs.constraints
    print("\n".join(lines))
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
