"""The torch layer: PyPI's torch wheel and its closure (the CUDA libraries its Linux wheel
needs to import, even with no GPU) installed into the trainmaster venv's site-packages, as
one OCI layer of its own, cached by the digest of its pins alone.

Why a layer of its own, at the bottom of the torch image: torch and its CUDA libraries are
about 4 GB unpacked and change only when their pins in uv.lock change; the trainmaster
layer above it changes with every edit of the tree. Keyed by the torch pins, a changed
tree reuses the cached layer and only the small layer above it is built; the layer's chain
id in a node's containerd stays the same, so a node that holds it unpacks it once.

uv installs the wheels (`uv pip install --target`, resolved for the image's Python and
glibc, pinned by uv.lock); nothing runs in a chroot, since wheels only unpack. The tar is
streamed through gzip level 1: CUDA libraries gain little from a higher level, and the
level 6 of the trainmaster layer took three times the CPU on a busy 2-core host.
"""

from __future__ import annotations

import compileall
import gzip
import hashlib
import json
import os
import py_compile
import shutil
import stat
import sys
import tarfile
import tempfile
import time
import tomllib
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from trainmaster.image._errors import ImageError
from trainmaster.image._inputs import LOCK_FILE, PYTHON_VERSION, canonical, lock_constraints
from trainmaster.image._oci import MEDIA_LAYER, Descriptor
from trainmaster.image._process import LineFn, run_step
from trainmaster.image._rootfs import VENV
from trainmaster.image._wheels import GLIBC_MINOR

TORCH_EXTRA = "torch"
"""The optional-dependency group of pyproject.toml that pins torch."""
TORCH_RECIPE = "2"  # bump when the way the layer is assembled changes
SITE_PACKAGES = f"{VENV}/lib/python{PYTHON_VERSION}/site-packages"
LAYER_GZIP_LEVEL = 1
# torch's own console script, written for the image's interpreter (uv's --target scripts
# carry the host's interpreter path).
TORCHRUN = (f"#!{VENV}/bin/python\nimport sys\nfrom torch.distributed.run import main\n"
            "sys.exit(main())\n")


@dataclass(frozen=True)
class TorchLayer:
    blob: Path
    descriptor: Descriptor
    diff_id: str
    unpacked_bytes: int
    pins: tuple[str, ...]
    key: str
    build_seconds: float
    cached: bool = False

    def as_json(self) -> dict[str, Any]:
        return {"blob": str(self.blob), "descriptor": self.descriptor.as_json(),
                "diff_id": self.diff_id, "unpacked_bytes": self.unpacked_bytes,
                "pins": list(self.pins), "key": self.key, "build_seconds": self.build_seconds}


def torch_requirements(root: Path) -> tuple[str, ...]:
    """The `torch` extra of pyproject.toml (e.g. `torch==2.15.0`)."""
    project = tomllib.loads((root / "pyproject.toml").read_text())["project"]
    found = project.get("optional-dependencies", {}).get(TORCH_EXTRA)
    if not found:
        raise ImageError(f"{root / 'pyproject.toml'}: no optional-dependencies.{TORCH_EXTRA} "
                         "(e.g. torch = [\"torch==2.15.0\"]): the torch image installs it")
    return tuple(found)


def torch_pins(lock: Path, requirements: tuple[str, ...]) -> tuple[str, ...]:
    """`name==version` of every package uv.lock reaches from the requirements (markers
    ignored: a superset, so any change of a pin the layer may hold changes its key)."""
    if not lock.is_file():
        raise ImageError(f"no {lock.name} in {lock.parent}: the torch layer is pinned by it "
                         "(run `make lock`)")
    packages: dict[str, dict[str, Any]] = {}
    for package in tomllib.loads(lock.read_text()).get("package", []):
        packages.setdefault(canonical(package["name"]), package)
    todo = [canonical(r.split("=")[0].split("<")[0].split(">")[0].split("[")[0].strip())
            for r in requirements]
    seen: set[str] = set()
    extras: set[tuple[str, str]] = set()
    while todo:
        name = todo.pop()
        if name not in packages:
            continue
        seen.add(name)
        package = packages[name]
        deps = list(package.get("dependencies", []))
        # A dependency with extras (torch -> cuda-toolkit[cublas, ...]) brings the
        # packages of those extras: the CUDA libraries themselves.
        for dep in list(deps):
            for extra in dep.get("extra", []):
                key = (canonical(dep["name"]), extra)
                if key not in extras and key[0] in packages:
                    extras.add(key)
                    deps += packages[key[0]].get("optional-dependencies", {}).get(extra, [])
        todo += [canonical(d["name"]) for d in deps if canonical(d["name"]) not in seen]
    missing = [r for r in requirements if canonical(r.split("=")[0]) not in seen]
    if missing:
        raise ImageError(f"{lock}: {', '.join(missing)} is not locked: run `make lock`")
    return tuple(sorted(f"{n}=={packages[n]['version']}" for n in seen))


def layer_key(pins: tuple[str, ...]) -> str:
    recipe = {"recipe": TORCH_RECIPE, "python": PYTHON_VERSION, "glibc": GLIBC_MINOR,
              "site": SITE_PACKAGES, "gzip": LAYER_GZIP_LEVEL, "pins": pins}
    return hashlib.sha256(json.dumps(recipe, sort_keys=True).encode()).hexdigest()


def _uv() -> str:
    beside = Path(sys.executable).parent / "uv"
    found = str(beside) if beside.is_file() else shutil.which("uv")
    if not found:
        raise ImageError("uv is not installed: the torch layer installs its wheels with it "
                         "(`make` puts it in .venv; or `pip install uv`)")
    return found


def _cached(entry: Path) -> TorchLayer | None:
    meta = entry / "layer.json"
    if not (entry / ".complete").exists() or not meta.is_file():
        return None
    data = json.loads(meta.read_text())
    desc = data["descriptor"]
    layer = TorchLayer(Path(data["blob"]), Descriptor(desc["mediaType"], desc["digest"],
                                                      desc["size"]),
                       data["diff_id"], data["unpacked_bytes"], tuple(data["pins"]),
                       data["key"], data["build_seconds"], cached=True)
    return layer if layer.blob.is_file() else None


def torch_layer(root: Path, cache: Path, on_line: LineFn, force: bool = False) -> TorchLayer:
    """The torch layer for the tree at `root`, from `cache` when its pins are unchanged."""
    pins = torch_pins(root / LOCK_FILE, torch_requirements(root))
    key = layer_key(pins)
    entry = cache / f"torch-layer-{key[:20]}"
    found = None if force else _cached(entry)
    if found is not None:
        return found
    start = time.monotonic()
    cache.mkdir(parents=True, exist_ok=True)
    for old in cache.glob("torch-layer-*"):  # one torch layer at a time: each is ~2 GB
        if old != entry:
            shutil.rmtree(old, ignore_errors=True)
    work = Path(tempfile.mkdtemp(prefix=".build-torch-", dir=cache))
    log = work / "build.log"
    try:
        site = work / "site-packages"
        constraints = work / "constraints.txt"
        # Every pin of the lock file: what uv resolves for the image is what uv.lock holds.
        constraints.write_text("".join(f"{pin}\n" for pin in lock_constraints(root / LOCK_FILE)))
        wanted = ", ".join(torch_requirements(root))
        on_line(f"installing {len(pins)} pinned packages with uv ({wanted})")
        run_step("uv pip install (the torch layer)",
                 [_uv(), "pip", "install", "--quiet", "--target", str(site),
                  "--python-version", PYTHON_VERSION,
                  "--python-platform", f"x86_64-manylinux_2_{GLIBC_MINOR}",
                  "--constraint", str(constraints), *torch_requirements(root)],
                 log, on_line, env={**os.environ, "UV_PYTHON_DOWNLOADS": "never"})
        shutil.rmtree(site / "bin", ignore_errors=True)
        # Bytecode, as the trainmaster layer keeps it: the image runs with
        # PYTHONDONTWRITEBYTECODE, so without it every worker that torchrun restarts would
        # compile torch's Python again. unchecked-hash: valid whatever the files' mtimes
        # (the layer sets them to 0), and the same bytes for the same sources.
        # A file that does not compile (a test fixture in some wheel) is left without.
        if f"{sys.version_info[0]}.{sys.version_info[1]}" == PYTHON_VERSION:
            on_line("compiling bytecode (unchecked-hash)")
            compileall.compile_dir(site, quiet=2, workers=0,
                                   invalidation_mode=py_compile.PycInvalidationMode.UNCHECKED_HASH)
        else:
            on_line(f"no bytecode: this Python is not the image's {PYTHON_VERSION}")
        on_line("writing the layer (tar, gzip level 1)")
        staged = work / "out"
        staged.mkdir()
        descriptor, diff_id, unpacked = write_layer(site, staged / "layer.tar.gz")
        if entry.exists():
            shutil.rmtree(entry)
        staged.rename(entry)
        shutil.copyfile(log, entry / "build.log")
        layer = TorchLayer(entry / "layer.tar.gz", descriptor, diff_id, unpacked, pins, key,
                           round(time.monotonic() - start, 1))
        (entry / "layer.json").write_text(json.dumps(layer.as_json(), indent=2))
        (entry / ".complete").touch()
        return layer
    except ImageError:
        if log.exists():
            shutil.copyfile(log, cache / "last-failed-torch-build.log")
        raise
    finally:
        shutil.rmtree(work, ignore_errors=True)


class _TwoHashes:
    """The tar stream: hashed as written (the diff_id), then gzipped into a file whose
    bytes are hashed too (the blob's digest)."""

    def __init__(self, out: Any) -> None:
        self.plain = hashlib.sha256()
        self.size = 0
        self.compressed = _Counting(out)
        self.gz = gzip.GzipFile(fileobj=self.compressed, mode="wb",
                                compresslevel=LAYER_GZIP_LEVEL, mtime=0)

    def write(self, data: bytes) -> int:
        self.plain.update(data)
        self.size += len(data)
        return self.gz.write(data)


class _Counting:
    def __init__(self, out: Any) -> None:
        self.out = out
        self.sha = hashlib.sha256()
        self.size = 0

    def write(self, data: bytes) -> int:
        self.sha.update(data)
        self.size += len(data)
        self.out.write(data)
        return len(data)

    def flush(self) -> None:
        self.out.flush()


def _info(name: str, path: Path | None, kind: bytes, mode: int, size: int = 0
          ) -> tarfile.TarInfo:
    info = tarfile.TarInfo(name)
    info.type, info.mode, info.size = kind, mode, size
    info.uid = info.gid = 0
    info.uname = info.gname = "root"
    info.mtime = 0  # equal pins give an equal layer
    if path is not None and kind == tarfile.SYMTYPE:
        info.linkname = os.readlink(path)
    return info


def write_layer(site: Path, out: Path) -> tuple[Descriptor, str, int]:
    """The layer: `site`'s files (their bytecode included) under the venv's
    site-packages, and bin/torchrun."""
    prefix = SITE_PACKAGES.lstrip("/")
    with out.open("wb") as raw:
        stream = _TwoHashes(raw)
        with tarfile.open(fileobj=stream, mode="w|", format=tarfile.PAX_FORMAT) as tar:  # type: ignore[call-overload]
            parts = prefix.split("/")
            for depth in range(1, len(parts) + 1):
                tar.addfile(_info("/".join(parts[:depth]), None, tarfile.DIRTYPE, 0o755))
            tar.addfile(_info(f"{VENV.lstrip('/')}/bin", None, tarfile.DIRTYPE, 0o755))
            script = TORCHRUN.encode()
            tar.addfile(_info(f"{VENV.lstrip('/')}/bin/torchrun", None, tarfile.REGTYPE,
                              0o755, len(script)), _bytes(script))
            for path in sorted(site.rglob("*")):
                name = f"{prefix}/{path.relative_to(site).as_posix()}"
                st = path.lstat()
                if stat.S_ISLNK(st.st_mode):
                    tar.addfile(_info(name, path, tarfile.SYMTYPE, 0o777))
                elif stat.S_ISDIR(st.st_mode):
                    tar.addfile(_info(name, path, tarfile.DIRTYPE, 0o755))
                else:
                    mode = 0o755 if st.st_mode & 0o111 else 0o644
                    with path.open("rb") as src:
                        tar.addfile(_info(name, path, tarfile.REGTYPE, mode, st.st_size), src)
        stream.gz.close()
    descriptor = Descriptor(MEDIA_LAYER, f"sha256:{stream.compressed.sha.hexdigest()}",
                            stream.compressed.size)
    return descriptor, f"sha256:{stream.plain.hexdigest()}", stream.size


def _bytes(data: bytes) -> Any:
    import io

    return io.BytesIO(data)
