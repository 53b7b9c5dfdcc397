"""Build the pinned Go binaries into a cache outside git, once per machine.

A family's binaries live in ``<cache>/tools/<family>-<version>-<digest>/`` where the digest
covers every file of the wrapper module (go.mod, go.sum, tools.go and any package of our own)
and the recipe, so a changed pin builds afresh and an unchanged one is reused. A build goes to
a temporary folder that is renamed into place only when every binary linked, so a killed build
never leaves a half-filled cache entry.
"""

from __future__ import annotations

import contextlib
import fcntl
import hashlib
import json
import os
import shutil
import subprocess
import time
from collections.abc import Callable, Iterable, Iterator
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass
from pathlib import Path

from trainmaster.errors import TrainmasterError
from trainmaster.toolchain._about import ABOUT
from trainmaster.toolchain._recipes import RECIPES, Recipe
from trainmaster.toolchain._upstream import (
    SourceError,
    checked_archive,
    sources_dir,
    unpack,
    write_source,
)

GO_MODULES_DIR = Path(__file__).parent / "go"

ProgressFn = Callable[[str, int, int], None]
"""Called as (family, packages compiled so far, packages in total)."""
StartFn = Callable[[str], None]
"""Called with a family's name when its build really starts (it is not cached)."""


class ToolchainError(TrainmasterError):
    """A tool could not be built or found; the message says which and why."""


def cache_root() -> Path:
    return Path(os.environ.get("TRAINMASTER_CACHE", Path.home() / ".cache" / "trainmaster"))


def _wrapper_files(family: str) -> list[Path]:
    """Every file of a family's wrapper module (go.mod, go.sum, tools.go, any own package)."""
    root = GO_MODULES_DIR / family
    return sorted(p.relative_to(root) for p in root.rglob("*") if p.is_file())


def _digest(recipe: Recipe) -> str:
    h = hashlib.sha256(repr(recipe).encode())
    if recipe.module_trees or recipe.stub_files:  # not in the repr (see Recipe)
        h.update(repr((recipe.module_trees, recipe.stub_files)).encode())
    if recipe.upstream is not None:
        h.update(repr(recipe.upstream).encode())
        if recipe.upstream.data_files:  # not in the repr (see UpstreamSource)
            h.update(repr(recipe.upstream.data_files).encode())
    for rel in _wrapper_files(recipe.family):
        h.update(str(rel).encode() + b"\0")
        h.update((GO_MODULES_DIR / recipe.family / rel).read_bytes())
    return h.hexdigest()[:12]


def family_dir(family: str) -> Path:
    recipe = RECIPES[family]
    return cache_root() / "tools" / f"{family}-{recipe.version}-{_digest(recipe)}"


def is_built(family: str) -> bool:
    return (family_dir(family) / ".complete").exists()


def tool_path(binary: str) -> Path:
    """Path of a built binary (or data file) by its name, e.g. ``kube-apiserver``."""
    for recipe in RECIPES.values():
        data = [dest for *_, dest in recipe.module_files]
        if recipe.upstream is not None:
            data += [dest for _, dest in recipe.upstream.data_files]
        if binary in recipe.binaries or binary in data:
            path = family_dir(recipe.family) / binary
            if not path.exists():
                raise ToolchainError(
                    f"{binary} is not built yet; run `trainmaster tools build` first"
                )
            return path
    raise ToolchainError(f"unknown tool {binary!r}")


@dataclass(frozen=True)
class BuildResult:
    family: str
    directory: Path
    seconds: float
    cached: bool


def _go_env(extra: dict[str, str] | None = None) -> dict[str, str]:
    env = dict(os.environ)
    env.update({"GOTOOLCHAIN": "local", "GOFLAGS": "-mod=mod", "CGO_ENABLED": "0"})
    env.update(extra or {})
    return env


def _require_go() -> str:
    go = shutil.which("go")
    if go is None:
        raise ToolchainError(
            "the Go toolchain is not on PATH: install Go 1.26 or newer "
            "(https://go.dev/doc/install) and run `trainmaster tools build` again"
        )
    return go


def _run(cmd: list[str], cwd: Path, log: Path, env: dict[str, str] | None = None) -> str:
    with log.open("a") as fh:
        fh.write(f"$ {' '.join(cmd)}\n")
        fh.flush()
        proc = subprocess.run(
            cmd, cwd=cwd, env=_go_env(env), stdout=subprocess.PIPE, stderr=fh, text=True
        )
    if proc.returncode != 0:
        raise subprocess.CalledProcessError(proc.returncode, cmd)
    return proc.stdout


@contextlib.contextmanager
def _family_lock(family: str) -> Iterator[None]:
    """Hold the family's build lock: two processes (a test and `tools build`, say) that
    need the same family build it once; the second waits and then reuses the result."""
    locks = cache_root() / "locks"
    locks.mkdir(parents=True, exist_ok=True)
    with (locks / f"{family}.lock").open("w") as fh:
        fcntl.flock(fh, fcntl.LOCK_EX)
        try:
            yield
        finally:
            fcntl.flock(fh, fcntl.LOCK_UN)


def _build_family(recipe: Recipe, progress: ProgressFn | None,
                  started: StartFn | None = None, sources: Path | None = None) -> BuildResult:
    if is_built(recipe.family):
        return BuildResult(recipe.family, family_dir(recipe.family), 0.0, cached=True)
    with _family_lock(recipe.family):
        if recipe.upstream is not None:
            return _build_upstream_locked(recipe, progress, started, sources)
        return _build_family_locked(recipe, progress, started)


def _fresh_workspace(family: str) -> tuple[Path, Path]:
    """The family's source folder, emptied, and its build log, truncated (the cache's
    src/, logs/ and tools/ folders made): where every build of a family starts."""
    root = cache_root()
    src = root / "src" / family
    logs = root / "logs"
    shutil.rmtree(src, ignore_errors=True)
    for folder in (src, logs, root / "tools"):
        folder.mkdir(parents=True, exist_ok=True)
    log = logs / f"{family}.log"
    log.write_text("")
    return src, log


def _build_upstream_locked(recipe: Recipe, progress: ProgressFn | None,
                           started: StartFn | None, sources: Path | None) -> BuildResult:
    """An upstream release: `go install MODULE/CMD@VERSION` as a user's machine would; when
    that fails (the proxy refuses the module, or part of it), `go build` in its source
    archive, unpacked into the cache once its digest matched the pin."""
    upstream = recipe.upstream
    assert upstream is not None
    go = _require_go()
    target = family_dir(recipe.family)
    start = time.monotonic()
    if (target / ".complete").exists():
        return BuildResult(recipe.family, target, 0.0, cached=True)
    if started is not None:
        started(recipe.family)
    src, log = _fresh_workspace(recipe.family)
    staging = target.with_name(target.name + ".partial")
    shutil.rmtree(staging, ignore_errors=True)
    staging.mkdir()
    ldflags = " ".join(("-s", "-w", *recipe.ldflags))
    try:
        refusal = _go_install(go, recipe, ldflags, src, staging, log, progress)
        if not refusal:
            origin = f"module proxy: go install {upstream.module}/...@{recipe.version}"
            if upstream.data_files:
                module = f"{upstream.module}@{recipe.version}"
                tree = _module_dir(go, module, src, log)
        else:
            # Checked before anything is unpacked or compiled: a wrong archive builds nothing.
            archive = checked_archive(recipe.family, upstream, sources_dir(sources), refusal)
            shutil.rmtree(staging)
            staging.mkdir()
            tree = unpack(archive, src)
            env = {"GOFLAGS": "", **upstream.archive_env}
            packages = [f"./{c}" for c in upstream.commands]
            total = len(_run([go, "list", "-deps", *packages], tree, log, env).split())
            single = len(packages) == 1
            out_arg = str(staging / recipe.binaries[0]) if single else f"{staging}/"
            cmd = [go, "build", "-v", "-trimpath", "-ldflags", ldflags, "-o", out_arg,
                   *packages]
            _stream_build(cmd, tree, log, recipe.family, total, progress, env)
            origin = (f"source archive {archive} (sha256 as pinned; go install from the "
                      f"module proxy failed: {refusal})")
        for rel, dest in upstream.data_files:
            out = staging / dest
            out.parent.mkdir(parents=True, exist_ok=True)
            shutil.copyfile(tree / rel, out)
            out.chmod(0o644)
        missing = [b for b in recipe.binaries if not (staging / b).exists()]
        if missing:
            raise ToolchainError(f"{recipe.family}: go produced no {', '.join(missing)}")
    except subprocess.CalledProcessError as exc:
        shutil.rmtree(staging, ignore_errors=True)
        tail = "\n".join(log.read_text().splitlines()[-15:])
        raise ToolchainError(
            f"building {recipe.family} {recipe.version} failed ({exc.cmd[1]} exited "
            f"{exc.returncode}); full log: {log}\n{tail}"
        ) from None
    except BaseException:
        shutil.rmtree(staging, ignore_errors=True)
        raise
    write_source(staging, origin)
    (staging / ".complete").write_text(recipe.version + "\n")
    shutil.rmtree(target, ignore_errors=True)
    staging.rename(target)
    # The unpacked tree is only a build input (hundreds of MB with vendor/).
    shutil.rmtree(src, ignore_errors=True)
    return BuildResult(recipe.family, target, time.monotonic() - start, cached=False)


def _go_install(go: str, recipe: Recipe, ldflags: str, cwd: Path, gobin: Path, log: Path,
                progress: ProgressFn | None) -> str:
    """`go install MODULE/CMD@VERSION ...` into gobin; '' when it worked, else go's reason
    (its first `go:` line), e.g. the proxy's 403."""
    assert recipe.upstream is not None
    cmd = [go, "install", "-v", "-trimpath", "-ldflags", ldflags,
           *(f"{recipe.upstream.package(c)}@{recipe.version}" for c in recipe.upstream.commands)]
    offset = log.stat().st_size
    try:
        # `go install pkg@version` ignores any go.mod: the module's own go.sum decides.
        _stream_build(cmd, cwd, log, recipe.family, 0, progress,
                      {"GOFLAGS": "", "GOBIN": str(gobin)})
    except subprocess.CalledProcessError as exc:
        with log.open() as fh:
            fh.seek(offset)
            # Not go's progress lines ("go: downloading ..."): its error.
            said = [line.strip() for line in fh if line.startswith("go: ")
                    and not line.startswith(("go: downloading ", "go: finding "))]
        return said[0][len("go: "):] if said else f"go install exited {exc.returncode}"
    return ""


def _build_family_locked(recipe: Recipe, progress: ProgressFn | None,
                         started: StartFn | None = None) -> BuildResult:
    go = _require_go()
    target = family_dir(recipe.family)
    start = time.monotonic()
    if (target / ".complete").exists():
        return BuildResult(recipe.family, target, 0.0, cached=True)
    if started is not None:
        started(recipe.family)
    # A fresh copy of the wrapper module, so files left by an earlier pin never leak in.
    src, log = _fresh_workspace(recipe.family)
    for own in _wrapper_files(recipe.family):
        (src / own).parent.mkdir(parents=True, exist_ok=True)
        shutil.copyfile(GO_MODULES_DIR / recipe.family / own, src / own)
    staging = target.with_name(target.name + ".partial")
    shutil.rmtree(staging, ignore_errors=True)
    staging.mkdir()
    try:
        for module, dest in recipe.module_trees:
            _copy_module(go, module, cache_root(), src / dest, log)
        for dest, text in recipe.stub_files:
            (src / dest).parent.mkdir(parents=True, exist_ok=True)
            (src / dest).write_text(text)
        for module, rel, dest in recipe.source_files:
            out = src / dest
            out.parent.mkdir(parents=True, exist_ok=True)
            shutil.copyfile(_module_dir(go, module, src, log) / rel, out)
            out.chmod(0o644)
        for workdir, gofile in recipe.generate:
            _run([go, "run", gofile], src / workdir, log, recipe.env)
        if recipe.packages:  # a family of data files only (CRDs) compiles nothing
            deps = _run(
                [go, "list", "-tags", ",".join(recipe.tags), "-deps", *recipe.packages],
                src, log, recipe.env,
            )
            total = len(deps.split())
            ldflags = " ".join(("-s", "-w", *recipe.ldflags))
            # One package: name the binary ourselves (go would call go.etcd.io/etcd/server/v3
            # "server"); several: go names each after its package folder.
            single = len(recipe.packages) == 1 and len(recipe.binaries) == 1
            out_arg = str(staging / recipe.binaries[0]) if single else f"{staging}/"
            cmd = [go, "build", "-v", "-trimpath", "-ldflags", ldflags, "-o", out_arg]
            if recipe.tags:
                cmd += ["-tags", ",".join(recipe.tags)]
            cmd += list(recipe.packages)
            _stream_build(cmd, src, log, recipe.family, total, progress, recipe.env)
        for module, rel, dest in recipe.module_files:
            out = staging / dest
            out.parent.mkdir(parents=True, exist_ok=True)
            shutil.copyfile(_module_dir(go, module, src, log) / rel, out)
            out.chmod(0o644)
        missing = [b for b in recipe.binaries if not (staging / b).exists()]
        if missing:
            raise ToolchainError(f"{recipe.family}: go build produced no {', '.join(missing)}")
    except subprocess.CalledProcessError as exc:
        shutil.rmtree(staging, ignore_errors=True)
        tail = "\n".join(log.read_text().splitlines()[-15:])
        raise ToolchainError(
            f"building {recipe.family} {recipe.version} failed ({exc.cmd[1]} exited "
            f"{exc.returncode}); full log: {log}\n{tail}"
        ) from None
    (staging / ".complete").write_text(recipe.version + "\n")
    shutil.rmtree(target, ignore_errors=True)
    staging.rename(target)
    return BuildResult(recipe.family, target, time.monotonic() - start, cached=False)


def _module_dir(go: str, module: str, src: Path, log: Path) -> Path:
    """Folder in the module cache of a module of the wrapper's build list, downloaded if need be."""
    return Path(json.loads(_run([go, "mod", "download", "-json", module], src, log))["Dir"])


def _copy_module(go: str, module: str, cwd: Path, dest: Path, log: Path) -> None:
    """Copy `module@version` from the module cache to `dest`, writable. Downloaded from a
    folder outside the wrapper, whose go.mod replaces that module with `dest` itself."""
    tree = Path(json.loads(_run([go, "mod", "download", "-json", module], cwd, log))["Dir"])
    shutil.copytree(tree, dest, copy_function=shutil.copyfile)
    for folder, _, files in os.walk(dest):
        os.chmod(folder, 0o755)  # the module cache's folders are read-only; rmtree needs this
        for name in files:
            os.chmod(os.path.join(folder, name), 0o644)


def _stream_build(
    cmd: list[str], cwd: Path, log: Path, family: str, total: int, progress: ProgressFn | None,
    env: dict[str, str] | None = None,
) -> None:
    # `go build -v` names each package as it compiles it: that is our progress signal.
    done = 0
    with log.open("a") as fh:
        fh.write(f"$ {' '.join(cmd)}\n")
        fh.flush()
        proc = subprocess.Popen(
            cmd, cwd=cwd, env=_go_env(env), stdout=fh, stderr=subprocess.PIPE, text=True
        )
        assert proc.stderr is not None
        for line in proc.stderr:
            fh.write(line)
            done += 1
            if progress is not None:
                # `go install` is not listed first: its total is the count so far.
                progress(family, min(done, total) if total else done, total or done)
        rc = proc.wait()
    if rc != 0:
        raise subprocess.CalledProcessError(rc, cmd)
    if progress is not None:
        progress(family, total or done, total or done)


BUILD_JOBS = 3
"""Families built at once by default. One Go build leaves the cores idle in its serial
steps (module downloads, code generation, linking); three at once built every family
from empty caches in 29 min on 2 idle cores (docs/benchmarks.md), one at a time 72 min on
a loaded machine (not measured idle)."""


def build(families: Iterable[str], progress: ProgressFn | None = None,
          started: StartFn | None = None, jobs: int = 1,
          finished: Callable[[BuildResult], None] | None = None,
          sources: Path | None = None) -> list[BuildResult]:
    """Build each family unless its pinned build is cached; raise ToolchainError on failure.
    ``started(family)`` is called as a family's build begins (never for a cached one),
    ``finished(result)`` as each one ends. ``jobs`` families build at once, the longest
    first; they share one Go build and module cache (each family holds its own lock).
    ``sources`` is the folder of upstream source archives for the families the module proxy
    refuses (default: TRAINMASTER_SOURCES)."""
    wanted = list(families)
    for family in wanted:
        if family not in RECIPES:
            raise ToolchainError(f"unknown tool family {family!r}; known: {', '.join(RECIPES)}")

    def one(family: str) -> BuildResult:
        try:
            result = _build_family(RECIPES[family], progress, started, sources)
        except SourceError as exc:
            raise ToolchainError(str(exc)) from None
        if finished is not None:
            finished(result)
        return result

    if jobs <= 1 or len(wanted) <= 1:
        return [one(family) for family in wanted]
    longest_first = sorted(wanted, key=lambda f: -sum(ABOUT[f].cold_minutes))
    with ThreadPoolExecutor(max_workers=jobs, thread_name_prefix="go-build") as pool:
        futures = {family: pool.submit(one, family) for family in longest_first}
    # Every build has ended (the pool waited): a failure is raised only now, so no build is
    # left running behind the error.
    return [futures[family].result() for family in wanted]
