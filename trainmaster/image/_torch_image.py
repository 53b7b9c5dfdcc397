"""The torch image (`trainmaster.local/trainmaster-torch:<version>`): the trainmaster image
with the torch layer beneath it, for jobs that run PyTorch (examples/transformer).

Two layers: the torch layer (cached by torch's pins, _torch_layer) at the bottom and the
trainmaster image's own layer on top, copied from its archive, so both images share that
blob in a node's containerd. A changed tree rebuilds only the trainmaster layer (about
5 minutes cold) and re-packs this archive; changed torch pins rebuild the torch layer.
"""

from __future__ import annotations

import hashlib
import json
import shutil
import tempfile
import time
from datetime import UTC, datetime
from pathlib import Path

from trainmaster.image._build import (
    IMAGE_ENV,
    BuiltImage,
    Progress,
    _cached,
    _slug,
    build_image,
    images_dir,
)
from trainmaster.image._oci import ImageConfig, LayerBlob, archive_layers, write_layered_archive
from trainmaster.image._torch_layer import torch_layer, torch_requirements

TORCH_SUFFIX = "-torch"
KEEP_TORCH_ARCHIVES = 1
"""Cached torch archives kept (about 2 GB each: the torch layer is in every one)."""


def torch_reference(reference: str) -> str:
    """The torch image's name for the trainmaster image `reference`:
    `trainmaster.local/trainmaster:0.1.0` -> `trainmaster.local/trainmaster-torch:0.1.0`."""
    head, slash, last = reference.rpartition("/")
    name, colon, tag = last.partition(":")
    return f"{head}{slash}{name}{TORCH_SUFFIX}{colon}{tag}"


def build_torch_image(source: Path, reference: str, progress: Progress | None = None,
                      force: bool = False) -> BuiltImage:
    """The torch image of the tree at `source`, named `reference` (see torch_reference);
    the trainmaster image it stands on is built first (or reused)."""
    report = progress or Progress()
    start = time.monotonic()
    base_reference = reference.replace(TORCH_SUFFIX + ":", ":", 1)
    base = build_image(source, base_reference, report)
    report.line("the torch layer (cached by torch's pins in uv.lock)")
    layer = torch_layer(source.resolve(), images_dir(), report.line, force)
    key = hashlib.sha256(f"{layer.key}\0{base.inputs_digest}".encode()).hexdigest()
    entry = images_dir() / f"{key[:20]}-{_slug(reference)}"
    found = None if force else _cached(entry)
    if found is not None:
        return found
    root = images_dir()
    for old in sorted((p for p in root.glob(f"*-{_slug(reference)}") if p != entry),
                      key=lambda p: p.stat().st_mtime, reverse=True)[KEEP_TORCH_ARCHIVES - 1:]:
        shutil.rmtree(old, ignore_errors=True)
    report.line(f"packing {reference}: the torch layer "
                f"({layer.descriptor.size / 1e6:.0f} MB) under {base_reference}'s layer")
    work = Path(tempfile.mkdtemp(prefix=".build-", dir=root))
    try:
        top = archive_layers(base.archive)
        config = ImageConfig(
            env=IMAGE_ENV,
            cmd=("trainmaster", "--help"),
            labels={
                "org.opencontainers.image.title": "trainmaster-torch",
                "org.opencontainers.image.source": "https://github.com/trainmaster/trainmaster",
                "io.trainmaster.inputs-digest": key,
                "io.trainmaster.torch": " ".join(torch_requirements(source.resolve())),
            },
            created=datetime.now(UTC),
        )
        staged = work / "out"
        staged.mkdir()
        name = base.archive.name.replace(".oci.tar", f"{TORCH_SUFFIX}.oci.tar")
        written = write_layered_archive(
            [LayerBlob(layer.descriptor, layer.diff_id, layer.blob), *top], config, reference,
            staged / name)
        if entry.exists():
            shutil.rmtree(entry)
        staged.rename(entry)
        built = BuiltImage(
            reference=reference,
            archive=entry / name,
            digest=written.manifest.digest,
            archive_bytes=(entry / name).stat().st_size,
            layer_bytes=layer.descriptor.size + sum(t.descriptor.size for t in top),
            rootfs_bytes=layer.unpacked_bytes + base.rootfs_bytes,
            build_seconds=round(time.monotonic() - start, 1),
            inputs_digest=key,
        )
        (entry / "image.json").write_text(json.dumps(built.as_json(), indent=2))
        (entry / ".complete").touch()
        return built
    finally:
        shutil.rmtree(work, ignore_errors=True)


__all__ = ["build_torch_image", "torch_reference"]
