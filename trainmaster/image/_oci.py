"""An OCI image archive written by hand: gzip layers (one, or the torch image's two), its
config, a manifest and an index, in the image-layout (oci-layout, index.json,
blobs/sha256/...), packed as one tar.

Why not umoci: it would unpack the rootfs tar into a directory only to tar it again, and
that round trip needs root (or rootless ownership tricks) to keep file owners. The layout
is four small JSON documents and content-addressed blobs; writing them is shorter than
driving a tool, and the layer is streamed straight from mmdebstrap's tar.
`ctr -n k8s.io images import` loads the archive; `io.containerd.image.name` names it.
"""

from __future__ import annotations

import gzip
import hashlib
import io
import json
import tarfile
from collections.abc import Callable
from dataclasses import dataclass
from datetime import UTC, datetime
from pathlib import Path
from typing import Any, BinaryIO

MEDIA_INDEX = "application/vnd.oci.image.index.v1+json"
MEDIA_MANIFEST = "application/vnd.oci.image.manifest.v1+json"
MEDIA_CONFIG = "application/vnd.oci.image.config.v1+json"
MEDIA_LAYER = "application/vnd.oci.image.layer.v1.tar+gzip"
_CHUNK = 1 << 20

BytesFn = Callable[[int, int], None]
"""(bytes done, bytes total) while the layer is compressed."""


@dataclass(frozen=True)
class Descriptor:
    media_type: str
    digest: str
    size: int

    def as_json(self) -> dict[str, Any]:
        return {"mediaType": self.media_type, "digest": self.digest, "size": self.size}


@dataclass(frozen=True)
class ImageConfig:
    """What the image runs with."""

    env: tuple[str, ...]
    cmd: tuple[str, ...]
    labels: dict[str, str]
    created: datetime


@dataclass(frozen=True)
class Written:
    archive: Path
    manifest: Descriptor
    config: Descriptor
    layer: Descriptor
    diff_id: str
    """sha256 of the uncompressed layer, as the config's rootfs lists it."""


class _HashingWriter(io.RawIOBase):
    def __init__(self, target: BinaryIO) -> None:
        self.target = target
        self.sha = hashlib.sha256()
        self.size = 0

    def writable(self) -> bool:
        return True

    def write(self, data: Any) -> int:
        view = memoryview(data)
        self.sha.update(view)
        self.size += len(view)
        self.target.write(view)
        return len(view)


def compress_layer(rootfs_tar: Path, out: Path, progress: BytesFn | None = None) -> tuple[
        Descriptor, str]:
    """gzip the rootfs tar into `out`; return its descriptor and its diff_id."""
    total = rootfs_tar.stat().st_size
    plain = hashlib.sha256()
    done = 0
    with rootfs_tar.open("rb") as src, out.open("wb") as raw:
        hashing = _HashingWriter(raw)
        # mtime=0: the gzip header carries no build time, so equal tars give equal blobs.
        with gzip.GzipFile(fileobj=hashing, mode="wb", compresslevel=6, mtime=0) as gz:
            while chunk := src.read(_CHUNK):
                plain.update(chunk)
                gz.write(chunk)
                done += len(chunk)
                if progress is not None:
                    progress(done, total)
    layer = Descriptor(MEDIA_LAYER, f"sha256:{hashing.sha.hexdigest()}", hashing.size)
    return layer, f"sha256:{plain.hexdigest()}"


def _blob(data: dict[str, Any]) -> tuple[bytes, str]:
    raw = json.dumps(data, sort_keys=True, separators=(",", ":")).encode()
    return raw, f"sha256:{hashlib.sha256(raw).hexdigest()}"


def config_document(config: ImageConfig, diff_id: str | list[str]) -> dict[str, Any]:
    diff_ids = [diff_id] if isinstance(diff_id, str) else diff_id
    created = config.created.astimezone(UTC).strftime("%Y-%m-%dT%H:%M:%SZ")
    return {
        "created": created,
        "architecture": "amd64",
        "os": "linux",
        "config": {
            "Env": list(config.env),
            "Cmd": list(config.cmd),
            "WorkingDir": "/",
            "Labels": dict(config.labels),
        },
        "rootfs": {"type": "layers", "diff_ids": diff_ids},
        # One entry per layer: the torch image's bottom one is the torch layer.
        "history": [{"created": created,
                     "created_by": ("trainmaster image build (mmdebstrap + wheels)"
                                    if i == len(diff_ids) - 1 else
                                    "trainmaster image build (the torch layer: uv + wheels)")}
                    for i in range(len(diff_ids))],
    }


def _tag(reference: str) -> str:
    last = reference.rsplit("/", 1)[-1]
    return last.split(":", 1)[1] if ":" in last else "latest"


@dataclass(frozen=True)
class LayerBlob:
    """One layer of an image: its compressed bytes (a file, or a member of another image's
    archive, read without unpacking it) and what the manifest and config say of it."""

    descriptor: Descriptor
    diff_id: str
    path: Path
    member: str | None = None
    """With `member`, `path` is a tar (an OCI archive) and the blob is that member."""

    def copy_into(self, tar: tarfile.TarFile) -> None:
        info = tarfile.TarInfo(_blob_path(self.descriptor.digest))
        info.size = self.descriptor.size
        info.mode = 0o644
        if self.member is None:
            with self.path.open("rb") as src:
                tar.addfile(info, src)
            return
        with tarfile.open(self.path) as outer:
            blob = outer.extractfile(self.member)
            if blob is None:
                raise ValueError(f"{self.path} has no blob {self.member}")
            tar.addfile(info, blob)


def archive_layers(archive: Path) -> list[LayerBlob]:
    """The layers of the (first) image of an OCI archive, as written by write_archive."""
    with tarfile.open(archive) as tar:
        def doc(name: str) -> dict[str, Any]:
            member = tar.extractfile(name)
            if member is None:
                raise ValueError(f"{archive} has no {name}")
            loaded: dict[str, Any] = json.loads(member.read())
            return loaded

        entry = doc("index.json")["manifests"][0]
        manifest = doc(_blob_path(entry["digest"]))
        config = doc(_blob_path(manifest["config"]["digest"]))
    return [LayerBlob(Descriptor(layer["mediaType"], layer["digest"], layer["size"]), diff_id,
                      archive, _blob_path(layer["digest"]))
            for layer, diff_id in zip(manifest["layers"], config["rootfs"]["diff_ids"],
                                      strict=True)]


def write_archive(
    layer_blob: Path, layer: Descriptor, diff_id: str, config: ImageConfig, reference: str,
    archive: Path,
) -> Written:
    """The OCI archive (a tar of the image layout) for one image named `reference`."""
    return write_layered_archive([LayerBlob(layer, diff_id, layer_blob)], config, reference,
                                 archive)


def write_layered_archive(layers: list[LayerBlob], config: ImageConfig, reference: str,
                          archive: Path) -> Written:
    """The OCI archive of an image of `layers` (the first is the bottom one)."""
    diff_ids = [layer.diff_id for layer in layers]
    config_raw, config_digest = _blob(config_document(config, diff_ids))
    config_desc = Descriptor(MEDIA_CONFIG, config_digest, len(config_raw))
    manifest = {
        "schemaVersion": 2,
        "mediaType": MEDIA_MANIFEST,
        "config": config_desc.as_json(),
        "layers": [layer.descriptor.as_json() for layer in layers],
        "annotations": {"org.opencontainers.image.created": config_document(
            config, diff_ids)["created"]},
    }
    manifest_raw, manifest_digest = _blob(manifest)
    manifest_desc = Descriptor(MEDIA_MANIFEST, manifest_digest, len(manifest_raw))
    index = {
        "schemaVersion": 2,
        "mediaType": MEDIA_INDEX,
        "manifests": [{
            **manifest_desc.as_json(),
            "platform": {"architecture": "amd64", "os": "linux"},
            # containerd names the image from the first; OCI tools from the second.
            "annotations": {
                "io.containerd.image.name": reference,
                "org.opencontainers.image.ref.name": _tag(reference),
            },
        }],
    }
    index_raw = json.dumps(index, sort_keys=True, indent=2).encode()
    layout_raw = json.dumps({"imageLayoutVersion": "1.0.0"}).encode()
    with tarfile.open(archive, "w", format=tarfile.PAX_FORMAT) as tar:
        _add_dir(tar, "blobs")
        _add_dir(tar, "blobs/sha256")
        _add_bytes(tar, "oci-layout", layout_raw)
        _add_bytes(tar, "index.json", index_raw)
        _add_bytes(tar, _blob_path(config_digest), config_raw)
        _add_bytes(tar, _blob_path(manifest_digest), manifest_raw)
        for layer in layers:
            layer.copy_into(tar)
    return Written(archive, manifest_desc, config_desc, layers[-1].descriptor,
                   layers[-1].diff_id)


def _blob_path(digest: str) -> str:
    algorithm, hexdigest = digest.split(":", 1)
    return f"blobs/{algorithm}/{hexdigest}"


def _add_dir(tar: tarfile.TarFile, name: str) -> None:
    info = tarfile.TarInfo(name)
    info.type = tarfile.DIRTYPE
    info.mode = 0o755
    tar.addfile(info)


def _add_bytes(tar: tarfile.TarFile, name: str, data: bytes) -> None:
    info = tarfile.TarInfo(name)
    info.size = len(data)
    info.mode = 0o644
    tar.addfile(info, io.BytesIO(data))
