"""`trainmaster image build`: wheel -> wheelhouse -> rootfs -> layer -> OCI archive, cached
under <cache>/images/<inputs digest>/ so an unchanged tree is not built twice."""

from __future__ import annotations

import json
import shutil
import tempfile
import time
from dataclasses import asdict, dataclass
from datetime import UTC, datetime
from pathlib import Path

from trainmaster.image._errors import ImageError
from trainmaster.image._inputs import EXAMPLES_DIR, Inputs, read_inputs
from trainmaster.image._oci import ImageConfig, compress_layer, write_archive
from trainmaster.image._rootfs import EXAMPLES, VENV, build_rootfs
from trainmaster.image._wheels import build_project_wheel, download_wheelhouse
from trainmaster.toolchain import cache_root

STEPS = ("wheel", "dependencies", "rootfs", "layer", "archive")
IMAGE_ENV = (
    f"PATH={VENV}/bin:/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin",
    "LANG=C.UTF-8",
    "PYTHONUNBUFFERED=1",
    # The Deployments run with a read-only root filesystem: never try to write .pyc files.
    "PYTHONDONTWRITEBYTECODE=1",
    f"TRAINMASTER_EXAMPLES={EXAMPLES}",
)


class Progress:
    """What a build reports as it goes; the CLI draws it, tests ignore it."""

    def step(self, index: int, name: str, detail: str) -> None: ...

    def line(self, text: str) -> None: ...

    def bytes(self, done: int, total: int) -> None: ...


@dataclass(frozen=True)
class BuiltImage:
    reference: str
    archive: Path
    digest: str
    """The manifest digest: what containerd lists as the image's digest."""
    archive_bytes: int
    layer_bytes: int
    """The compressed layer (what a registry stores and a node pulls)."""
    rootfs_bytes: int
    """The uncompressed rootfs (what the image takes unpacked on a node)."""
    build_seconds: float
    inputs_digest: str
    cached: bool = False

    def as_json(self) -> dict[str, object]:
        return {**asdict(self), "archive": str(self.archive)}


def images_dir() -> Path:
    return cache_root() / "images"


def _cached(entry: Path) -> BuiltImage | None:
    meta = entry / "image.json"
    if not (entry / ".complete").exists() or not meta.is_file():
        return None
    data = json.loads(meta.read_text())
    data["archive"] = Path(data["archive"])
    built = BuiltImage(**{**data, "cached": True})
    return built if built.archive.is_file() else None


def build_image(
    source: Path,
    reference: str,
    progress: Progress | None = None,
    force: bool = False,
    output: Path | None = None,
) -> BuiltImage:
    """Build the trainmaster image from the tree at `source`, or reuse the cached build of
    the same inputs; copy the archive to `output` if given."""
    report = progress or Progress()
    inputs = read_inputs(source.resolve())
    key = inputs.digest()
    entry = images_dir() / f"{key[:20]}-{_slug(reference)}"
    built = None if force else _cached(entry)
    if built is None:
        built = _build(inputs, key, reference, entry, report)
    if output is not None:
        output.parent.mkdir(parents=True, exist_ok=True)
        shutil.copyfile(built.archive, output)
    return built


def _slug(reference: str) -> str:
    return "".join(c if c.isalnum() or c in "-." else "_" for c in reference)


KEEP_BUILDS = 3
"""Cached archives kept per image reference (about 100 MB each); older ones are removed."""
_STALE_WORK_SECONDS = 6 * 3600


def _prune(root: Path, reference: str) -> None:
    """Drop the oldest complete builds of `reference` beyond KEEP_BUILDS, and the work
    folders of builds that were killed (SIGKILL leaves them behind) hours ago."""
    builds = sorted((p for p in root.glob(f"*-{_slug(reference)}") if (p / ".complete").exists()),
                    key=lambda p: (p / ".complete").stat().st_mtime, reverse=True)
    for old in builds[KEEP_BUILDS:]:
        shutil.rmtree(old, ignore_errors=True)
    for work in root.glob(".build-*"):
        if time.time() - work.stat().st_mtime > _STALE_WORK_SECONDS:
            shutil.rmtree(work, ignore_errors=True)


def _build(inputs: Inputs, key: str, reference: str, entry: Path,
           report: Progress) -> BuiltImage:
    start = time.monotonic()
    root = images_dir()
    root.mkdir(parents=True, exist_ok=True)
    _prune(root, reference)
    work = Path(tempfile.mkdtemp(prefix=".build-", dir=root))
    log = work / "build.log"
    try:
        report.step(1, "wheel", "building the trainmaster wheel from the tree")
        wheel = build_project_wheel(inputs, work, log, report.line)
        pinning = (f"pinned by {len(inputs.constraints)} uv.lock entries" if inputs.constraints
                   else "no lock file: the ranges of pyproject.toml")
        report.step(2, "dependencies",
                    f"{len(inputs.requirements)} runtime requirements ({pinning})")
        house = download_wheelhouse(inputs, work, log, report.line)
        shutil.copy2(wheel, house / wheel.name)
        report.line(f"{len(list(house.glob('*.whl')))} wheels, "
                    f"{_mb(sum(p.stat().st_size for p in house.glob('*.whl')))}")
        report.step(3, "rootfs", "mmdebstrap: Debian bookworm + python3 + the venv")
        examples = inputs.root / EXAMPLES_DIR
        rootfs = build_rootfs(house, examples if examples.is_dir() else None,
                              work / "rootfs.tar", log, report.line,
                              source_date_epoch=int(time.time()))
        report.step(4, "layer", f"gzip {_mb(rootfs.stat().st_size)} rootfs")
        layer, diff_id = compress_layer(rootfs, work / "layer.tar.gz", report.bytes)
        report.step(5, "archive", "OCI layout: config, manifest, index")
        config = ImageConfig(
            env=IMAGE_ENV,
            cmd=("trainmaster", "--help"),
            labels={
                "org.opencontainers.image.title": "trainmaster",
                "org.opencontainers.image.version": inputs.version,
                "org.opencontainers.image.source": "https://github.com/trainmaster/trainmaster",
                "io.trainmaster.inputs-digest": key,
            },
            created=datetime.now(UTC),
        )
        staged = work / "out"
        staged.mkdir()
        archive_name = f"trainmaster-{inputs.version}.oci.tar"
        written = write_archive(work / "layer.tar.gz", layer, diff_id, config, reference,
                                staged / archive_name)
        rootfs_bytes = rootfs.stat().st_size
        # Only the archive is kept; the rootfs and layer are in it or derived from it.
        if entry.exists():
            shutil.rmtree(entry)
        staged.rename(entry)
        shutil.copyfile(log, entry / "build.log")
        built = BuiltImage(
            reference=reference,
            archive=entry / archive_name,
            digest=written.manifest.digest,
            archive_bytes=(entry / archive_name).stat().st_size,
            layer_bytes=layer.size,
            rootfs_bytes=rootfs_bytes,
            build_seconds=round(time.monotonic() - start, 1),
            inputs_digest=key,
        )
        (entry / "image.json").write_text(json.dumps(built.as_json(), indent=2))
        (entry / ".complete").touch()
        return built
    except ImageError:
        kept = root / "last-failed-build.log"
        if log.exists():
            shutil.copyfile(log, kept)
        raise
    finally:
        shutil.rmtree(work, ignore_errors=True)


def _mb(size: int) -> str:
    return f"{size / 1e6:.1f} MB"


__all__ = ["STEPS", "BuiltImage", "Progress", "build_image", "images_dir"]
